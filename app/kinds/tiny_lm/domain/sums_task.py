"""The training paths' task: sums of 2 to 6 one-digit numbers, where more reasoning
steps help. A completion may work it out as running sums in <think> (`3+5=8 8+9=17 17+2=19`)
or jump to a guess (`<think>19</think>`); the rewards stay R1's rules (arith_task.rewards: an
answer right in either script, the template, the prompt's script in the reasoning).

Why this task: length growth under RL is not guaranteed (Yeo et al. 2025, arXiv 2502.03373); it
needs a task where more steps help and a base that sometimes takes them (Oat-zero). On sums of
many numbers a one-shot guess of a tiny model is mostly wrong, a running sum mostly right, so a
reward on the answer alone can make answers longer. Pure Python, seeded; the engine samples.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from app.kinds.tiny_lm.domain.arith_task import SEP, parse, read_number, write_number

SIZES = (2, 3, 4, 5, 6)  # numbers per problem: the difficulty
LOW, HIGH = 1, 9  # each number
_STEP = re.compile(r"^([0-9a-j]+)\+([0-9a-j]+)=([0-9a-j]+)$")


@dataclass(frozen=True)
class SumPrompt:
    operands: tuple[int, ...]
    script: str  # "digits" | "letters": what "the prompt's language" is for the language reward

    @property
    def text(self) -> str:
        return "+".join(write_number(x, self.script) for x in self.operands) + "="

    @property
    def answer(self) -> int:
        return sum(self.operands)

    @property
    def difficulty(self) -> int:
        return len(self.operands)


def make_sum_prompts(count: int, seed: int) -> tuple[SumPrompt, ...]:
    """`count` seeded prompts, the sizes in turn (so every difficulty has a fifth), scripts alternating
    within each size."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        size = SIZES[i % len(SIZES)]
        script = ("digits", "letters")[(i // len(SIZES)) % 2]
        out.append(SumPrompt(tuple(rng.randint(LOW, HIGH) for _ in range(size)), script))
    return tuple(out)


def running_steps(operands: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """The running sums as (left, right, total): 3,5,9 -> (3, 5, 8), (8, 9, 17)."""
    steps, total = [], operands[0]
    for x in operands[1:]:
        steps.append((total, x, total + x))
        total += x
    return steps


def write_step(left: int, right: int, total: int, script: str) -> str:
    return f"{write_number(left, script)}+{write_number(right, script)}={write_number(total, script)}"


def write_steps(steps: list[tuple[int, int, int]], script: str) -> str:
    return SEP.join(write_step(*s, script) for s in steps)


@dataclass(frozen=True)
class Habit:
    """How a completion went about it, read from its <think>.
    stepwise: at least one written step `a+b=c`; steps: how many; rechecks: steps that repeat the
    previous step's left side (a step recomputed after a slip: `8+9=18 8+9=17`)."""
    stepwise: bool
    steps: int
    rechecks: int


def habit(completion: str) -> Habit:
    think = parse(completion).think
    if not think:
        return Habit(False, 0, 0)
    steps = [m.groups() for m in map(_STEP.match, think.split(SEP)) if m]
    lefts = [(read_number(a), read_number(b)) for a, b, _ in steps]
    rechecks = sum(1 for i in range(1, len(lefts)) if lefts[i] == lefts[i - 1])
    return Habit(bool(steps), len(steps), rechecks)


def read_sum_prompt(text: str) -> SumPrompt | None:
    """A prompt read back from its text ("3+5+9=", "d+f="); None if it is not one."""
    if not text.endswith("="):
        return None
    numbers = [read_number(part) for part in text[:-1].split("+")]
    if len(numbers) < 2 or any(n is None for n in numbers):
        return None
    letters = any(ch in "abcdefghij" for ch in text)
    return SumPrompt(tuple(n for n in numbers if n is not None), "letters" if letters else "digits")
