"""The tiny LM's task (issue 13): tokens, prompts and R1's rule rewards, part by part."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.kinds.tiny_lm.domain.arith_task import (
    ADDITION_VOCAB_SIZE,
    ANSWER,
    ANSWER_END,
    END,
    SEP,
    THINK,
    THINK_END,
    VOCAB,
    ArithPrompt,
    decode,
    encode,
    make_prompts,
    read_number,
    rewards,
    write_number,
)

TEMPLATE = THINK + "{think}" + THINK_END + ANSWER + "{answer}" + ANSWER_END + END


def test_vocabulary_is_small_and_every_token_reads():
    assert len(VOCAB) == len(set(VOCAB)) == 29
    # the addition checkpoint reads the first 28; the running sums' separator was appended after them
    assert VOCAB[ADDITION_VOCAB_SIZE:] == (SEP,) and SEP not in "".join(VOCAB[:ADDITION_VOCAB_SIZE])
    assert encode(THINK + "3+d=" + THINK_END) == [VOCAB.index(THINK), VOCAB.index("3"), VOCAB.index("+"),
                                                  VOCAB.index("d"), VOCAB.index("="), VOCAB.index(THINK_END)]


@given(st.lists(st.sampled_from(VOCAB), max_size=30))
def test_decode_then_encode_is_the_identity(tokens):
    ids = [VOCAB.index(t) for t in tokens]
    assert encode(decode(ids)) == ids


def test_characters_outside_the_vocabulary_are_refused():
    with pytest.raises(ValueError, match="'x' at 1"):
        encode("3x")


@given(st.integers(0, 10**6), st.sampled_from(["digits", "letters"]))
def test_numbers_read_back_in_either_script(value, script):
    assert read_number(write_number(value, script)) == value


def test_mixed_scripts_read_as_one_number_and_junk_as_none():
    assert read_number("4c") == 42 and read_number("") is None and read_number("4+2") is None


def test_prompts_are_seeded_and_use_both_scripts():
    prompts = make_prompts(10, seed=3)
    assert prompts == make_prompts(10, seed=3) and prompts != make_prompts(10, seed=4)
    assert {p.script for p in prompts} == {"digits", "letters"}
    assert ArithPrompt(37, 5, "letters").text == "dh+f="


@pytest.mark.parametrize("completion, parts", [
    # right, formatted, reasoning all in the prompt's script
    (TEMPLATE.format(think="7+5=12", answer="42"), (1.0, 1.0, 1.0)),
    # right answer written in the other script: still right (the value counts), reasoning mixed
    (TEMPLATE.format(think="7+f=12", answer="ec"), (1.0, 1.0, 3 / 4)),
    # the template ignored: no answer can be parsed; the whole text stands for the reasoning
    ("42" + END, (0.0, 0.0, 1.0)),
    # wrong but well formatted
    (TEMPLATE.format(think="7+5=13", answer="43"), (0.0, 1.0, 1.0)),
    # an empty think part is not the template
    (TEMPLATE.format(think="", answer="42"), (1.0, 0.0, 1.0)),
    # tokens after <end> were never generated
    (TEMPLATE.format(think="7+5=12", answer="42") + "ddd", (1.0, 1.0, 1.0)),
])
def test_reward_parts(completion, parts):
    got = rewards(ArithPrompt(37, 5, "digits"), completion)
    assert (got.accuracy, got.format, got.language) == pytest.approx(parts)
    assert got.total(("accuracy", "format")) == pytest.approx(parts[0] + parts[1])
