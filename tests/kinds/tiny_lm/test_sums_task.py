"""The running-sums task of the training paths (issue 22): prompts by difficulty, the habit read
from a completion's <think>, and R1's rules scoring it like the addition task's."""
from collections import Counter

from app.kinds.tiny_lm.domain.arith_task import encode, rewards
from app.kinds.tiny_lm.domain.sums_task import (
    SIZES,
    SumPrompt,
    habit,
    make_sum_prompts,
    read_sum_prompt,
    running_steps,
    write_steps,
)


def test_prompts_cover_every_difficulty_in_both_scripts_and_are_seeded():
    prompts = make_sum_prompts(100, seed=4)
    assert Counter(p.difficulty for p in prompts) == {n: 20 for n in SIZES}
    assert {(p.difficulty, p.script) for p in prompts} == {(n, s) for n in SIZES for s in ("digits", "letters")}
    assert prompts == make_sum_prompts(100, seed=4) and prompts != make_sum_prompts(100, seed=5)
    assert all(1 <= x <= 9 for p in prompts for x in p.operands)


def test_text_answer_and_reading_back():
    p = SumPrompt((3, 5, 9), "digits")
    assert (p.text, p.answer, p.difficulty) == ("3+5+9=", 17, 3)
    q = SumPrompt((3, 5, 9), "letters")
    assert q.text == "d+f+j=" and read_sum_prompt(q.text) == q and read_sum_prompt(p.text) == p
    assert read_sum_prompt("3+=") is None and read_sum_prompt("35") is None and read_sum_prompt("7=") is None


def test_running_steps_written_with_the_separator_token():
    steps = running_steps((3, 5, 9, 2))
    assert steps == [(3, 5, 8), (8, 9, 17), (17, 2, 19)]
    text = write_steps(steps, "digits")
    assert text == "3+5=8 8+9=17 17+2=19"
    assert encode(text).count(encode(" ")[0]) == 2  # the separator is one token


def test_habits_read_from_the_think_part():
    step = "<think>3+5=8 8+9=17</think><answer>17</answer><end>"
    guess = "<think>17</think><answer>17</answer><end>"
    recheck = "<think>3+5=8 8+9=18 8+9=17</think><answer>17</answer><end>"
    assert habit(step) == (h := habit(step)) and (h.stepwise, h.steps, h.rechecks) == (True, 2, 0)
    assert (habit(guess).stepwise, habit(guess).steps) == (False, 0)
    assert (habit(recheck).steps, habit(recheck).rechecks) == (3, 1)
    assert habit("17<end>").stepwise is False  # no template: no reasoning to read
    # the letters script's steps count too, and one repeated step is one re-check
    assert habit("<think>d+f=i i+j=bh i+j=bg</think><answer>bg</answer><end>").rechecks == 1


def test_the_rules_score_a_sum_as_they_score_an_addition():
    p = SumPrompt((3, 5, 9), "digits")
    right = rewards(p, "<think>3+5=8 8+9=17</think><answer>17</answer><end>")
    assert (right.accuracy, right.format, right.language) == (1.0, 1.0, 1.0)
    mixed = rewards(p, "<think>3+5=8 i+j=bh</think><answer>bh</answer><end>")
    assert mixed.accuracy == 1.0 and 0 < mixed.language < 1
    assert rewards(p, "<think>18</think><answer>18</answer><end>").accuracy == 0.0
    assert rewards(p, "17<end>").format == 0.0
