"""The running-sums base's corpus (issue 22): both habits, drawn independently of the problem's
size, every text within the model's context, and the slips and re-checks what they claim."""
import random
from collections import Counter

import pytest

from app.kinds.tiny_lm.domain.arith_task import encode, parse, read_number, rewards
from app.kinds.tiny_lm.domain.sums_corpus import GUESS_RIGHT, MIX, build_sums_corpus, completion
from app.kinds.tiny_lm.domain.sums_task import SumPrompt, habit
from app.kinds.tiny_lm.engine.sums_base import SUMS_MODEL

CORPUS = build_sums_corpus(6000, seed=0)


def test_shares_follow_the_mix_at_every_size():
    counts = Counter(e.kind for e in CORPUS)
    for kind, share in MIX.items():
        assert abs(counts[kind] / len(CORPUS) - share) < 0.02, kind
    for n in GUESS_RIGHT:  # the habit does not depend on the size: RL is what may make it
        sized = [e for e in CORPUS if e.prompt.difficulty == n]
        stepwise = sum(habit(e.text[len(e.prompt.text):]).stepwise for e in sized) / len(sized)
        assert abs(stepwise - (MIX["stepwise"] + MIX["slip"] + MIX["recheck"] + MIX["mixed"])) < 0.05


def test_every_text_fits_the_model():
    assert max(len(encode(e.text)) for e in CORPUS) <= SUMS_MODEL.block_size + 1


@pytest.mark.parametrize("kind,right", [("stepwise", True), ("recheck", True), ("mixed", True), ("slip", False)])
def test_each_habit_is_what_it_says(kind, right):
    rng = random.Random(3)
    for operands in ((3, 5), (9, 9, 9, 9, 9, 9), (1, 2, 3, 4)):
        p = SumPrompt(operands, "digits")
        text = completion(p, kind, rng)
        parts = rewards(p, text)
        assert (parts.accuracy == 1.0) is right and parts.format == 1.0
        h = habit(text)
        assert h.stepwise and h.rechecks == (1 if kind == "recheck" else 0)
        if kind == "mixed":
            assert parts.language <= 1.0
        if kind == "slip":  # the slip carries through to the answer: the last step's total is the answer
            think = parse(text).think or ""
            assert read_number(think.split(" ")[-1].split("=")[1]) == read_number(parse(text).answer or "")


def test_guesses_are_right_more_often_on_short_sums():
    rng = random.Random(1)
    rate = {n: sum(rewards(p := SumPrompt((5,) * n, "digits"), completion(p, "guess", rng)).accuracy
                   for _ in range(400)) / 400 for n in GUESS_RIGHT}
    assert all(abs(rate[n] - GUESS_RIGHT[n]) < 0.07 for n in rate) and rate[2] > rate[6]
    assert habit(completion(SumPrompt((5, 5, 5), "digits"), "guess", rng)).stepwise is False
