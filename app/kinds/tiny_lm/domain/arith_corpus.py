"""The synthetic pre-training corpus of the tiny LM's base checkpoint.

Built so that the base model is mediocre in exactly R1-Zero's ways: the corpus mixes
completions that are right and formatted, right but reasoned in the other script ("language
mixing"), unformatted (no template, so no answer can be parsed), and formatted but wrong.
GRPO then has something to fix. Pure Python and seeded: the same corpus on every machine.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.kinds.tiny_lm.domain.arith_task import (
    ANSWER,
    ANSWER_END,
    END,
    THINK,
    THINK_END,
    ArithPrompt,
    Problem,
    make_prompts,
    write_number,
)

# Shares of each kind of completion in the corpus (the base model's habits).
MIX = {"correct": 0.4, "mixed": 0.2, "unformatted": 0.2, "wrong": 0.2}


def reasoning(prompt: ArithPrompt, script: str) -> str:
    """One step of column addition: the ones digits and their sum, e.g. 37+5 -> "7+5=12"."""
    ones = prompt.a % 10
    return f"{write_number(ones, script)}+{write_number(prompt.b, script)}={write_number(ones + prompt.b, script)}"


def other(script: str) -> str:
    return "letters" if script == "digits" else "digits"


def completion(prompt: ArithPrompt, kind: str, rng: random.Random) -> str:
    """One completion of the given kind, as text ending with the end token."""
    own = prompt.script
    if kind == "correct":
        return f"{THINK}{reasoning(prompt, own)}{THINK_END}{ANSWER}{write_number(prompt.answer, own)}{ANSWER_END}{END}"
    if kind == "mixed":  # right answer, but the reasoning drifts into the other script
        return (f"{THINK}{reasoning(prompt, other(own))}{THINK_END}"
                f"{ANSWER}{write_number(prompt.answer, rng.choice((own, other(own))))}{ANSWER_END}{END}")
    if kind == "unformatted":  # the template ignored: a bare number
        return f"{write_number(prompt.answer, own)}{END}"
    if kind == "wrong":  # formatted, off by a small amount (a carry forgotten, a slip)
        slip = rng.choice((-10, -1, 1, 10))
        value = max(0, prompt.answer + slip)
        return f"{THINK}{reasoning(prompt, own)}{THINK_END}{ANSWER}{write_number(value, own)}{ANSWER_END}{END}"
    raise ValueError(f"unknown completion kind {kind!r}")


P = TypeVar("P", bound=Problem)


@dataclass(frozen=True)
class Example(Generic[P]):
    prompt: P
    kind: str
    text: str  # prompt + completion


def draw_examples(size: int, rng: random.Random, prompts: Sequence[P], mix: dict[str, float],
                  write: Callable[[P, str, random.Random], str]) -> tuple[Example[P], ...]:
    """`size` examples: a prompt drawn from `prompts`, a kind with the shares of `mix`, its text."""
    kinds, weights = zip(*mix.items(), strict=True)
    out = []
    for _ in range(size):
        prompt = rng.choice(prompts)
        kind = rng.choices(kinds, weights)[0]
        out.append(Example(prompt, kind, prompt.text + write(prompt, kind, rng)))
    return tuple(out)


def build_corpus(size: int, seed: int, prompt_pool: int = 400) -> tuple[Example[ArithPrompt], ...]:
    """`size` examples over a pool of seeded prompts, kinds drawn with the shares of MIX."""
    rng = random.Random(seed)
    return draw_examples(size, rng, make_prompts(prompt_pool, seed), MIX, completion)
