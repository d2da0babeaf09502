"""The tiny language model's task: short additions written token by token, in two
scripts, with DeepSeek-R1's rule-based rewards reported part by part.

Tokens are readable on screen: the digits 0-9, a second script a-j for the same digits (so
"language mixing" exists: `3+d=` is 3 + 3 written in the other script), `+`, `=`, four tags
and the end token. A completion is R1's template, `<think>…</think><answer>…</answer><end>`.
Pure Python: the engine turns token ids into tensors, the views draw the text.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

DIGITS = "0123456789"
SECOND_SCRIPT = "abcdefghij"  # a = 0 … j = 9: the same numbers in another script
THINK, THINK_END, ANSWER, ANSWER_END, END, PAD = "<think>", "</think>", "<answer>", "</answer>", "<end>", "<pad>"
SEP = " "  # between two reasoning steps of the running-sums task (domain/sums_task.py)
TAGS = (THINK, THINK_END, ANSWER, ANSWER_END)

# Token id order is part of a checkpoint's meaning: never reorder, only append.
VOCAB: tuple[str, ...] = (PAD, END, *TAGS, "+", "=", *DIGITS, *SECOND_SCRIPT, SEP)
# The addition checkpoint reads the first 28 (it was trained before SEP was appended).
ADDITION_VOCAB_SIZE = 28
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
SCRIPTS = {"digits": DIGITS, "letters": SECOND_SCRIPT}


def encode(text: str) -> list[int]:
    """Text to token ids: a tag is one token, every other character is one; anything else is refused."""
    ids, i = [], 0
    while i < len(text):
        tag = next((t for t in (*TAGS, END, PAD) if text.startswith(t, i)), None)
        token = tag or text[i]
        if token not in TOKEN_ID:
            raise ValueError(f"{token!r} at {i} is not in the vocabulary")
        ids.append(TOKEN_ID[token])
        i += len(token)
    return ids


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def write_number(value: int, script: str) -> str:
    alphabet = SCRIPTS[script]
    return "".join(alphabet[int(d)] for d in str(value))


def read_number(text: str) -> int | None:
    """The value of digits in either script, even mixed ("4c" = 42); None if anything else is there."""
    if not text:
        return None
    out = 0
    for ch in text:
        if ch in DIGITS:
            out = 10 * out + DIGITS.index(ch)
        elif ch in SECOND_SCRIPT:
            out = 10 * out + SECOND_SCRIPT.index(ch)
        else:
            return None
    return out


class Problem(Protocol):
    """What the rewards read of a prompt: an addition here, a running sum (sums_task.py)."""

    @property
    def text(self) -> str: ...
    @property
    def answer(self) -> int: ...
    @property
    def script(self) -> str: ...


@dataclass(frozen=True)
class ArithPrompt:
    a: int
    b: int
    script: str  # the prompt's script: a completion "in the prompt's language" uses it

    @property
    def text(self) -> str:
        return f"{write_number(self.a, self.script)}+{write_number(self.b, self.script)}="

    @property
    def answer(self) -> int:
        return self.a + self.b


def make_prompts(count: int, seed: int, max_operand: int = 49) -> tuple[ArithPrompt, ...]:
    """A fixed, seeded set of prompts; half in each script."""
    rng = random.Random(seed)
    return tuple(ArithPrompt(rng.randint(0, max_operand), rng.randint(0, 9), ("digits", "letters")[i % 2])
                 for i in range(count))


@dataclass(frozen=True)
class Parsed:
    """A completion split along R1's template; `formatted` only when it is exactly the template."""
    think: str | None
    answer: str | None
    formatted: bool


def parse(completion: str) -> Parsed:
    body = completion.split(END, 1)[0]  # what follows the end token was never generated
    if body.startswith(THINK) and THINK_END in body:
        think, rest = body[len(THINK):].split(THINK_END, 1)
        if rest.startswith(ANSWER) and rest.endswith(ANSWER_END):
            answer = rest[len(ANSWER):-len(ANSWER_END)]
            clean = all(t not in think + answer for t in TAGS)
            return Parsed(think, answer, clean and bool(think) and bool(answer))
        return Parsed(think, None, False)
    return Parsed(None, None, False)


@dataclass(frozen=True)
class RewardParts:
    """R1's rule-based rewards (§2.2.2 accuracy and format, §2.3.2 language consistency), apart."""
    accuracy: float  # 1 when <answer> holds the right value, in either script
    format: float  # 1 when the completion is exactly <think>…</think><answer>…</answer>
    language: float  # share of the reasoning's number characters written in the prompt's script

    def total(self, parts: tuple[str, ...]) -> float:
        return sum(getattr(self, p) for p in parts)


def rewards(prompt: Problem, completion: str) -> RewardParts:
    parsed = parse(completion)
    accuracy = 1.0 if parsed.answer is not None and read_number(parsed.answer) == prompt.answer else 0.0
    # R1 measures the target language's share in the chain of thought; without a think part,
    # the whole completion stands for it. No number character at all: nothing is mixed.
    reasoning = parsed.think if parsed.think is not None else parse_free_text(completion)
    symbols = [ch for ch in reasoning if ch in DIGITS or ch in SECOND_SCRIPT]
    own = SCRIPTS[prompt.script]
    language = sum(ch in own for ch in symbols) / len(symbols) if symbols else 1.0
    return RewardParts(accuracy, 1.0 if parsed.formatted else 0.0, language)


def parse_free_text(completion: str) -> str:
    """The completion without its tags and end: what an unformatted answer says."""
    text = completion.split(END, 1)[0]
    for tag in TAGS:
        text = text.replace(tag, "")
    return text
