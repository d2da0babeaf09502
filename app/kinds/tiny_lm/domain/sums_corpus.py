"""The pre-training corpus of the running-sums base checkpoint: a base with both habits.

Most completions guess (`<think>19</think><answer>19</answer>`), right often on two numbers and
rarely on six: a guess stands for a model that adds in one jump, as TinyZero's 0.5B model did.
Some work step by step, mostly right; a few slip once (the answer is then wrong) and a few slip
and recompute that step (the re-check, so its frequency can be measured). R1-Zero's other flaws
stay: reasoning in the other script ("language mixing") and answers without the template.
Every habit is drawn independently of the problem's size, so the base takes steps as often on
easy problems as on hard ones: RL is what may make it take them where they pay. Seeded.
"""
from __future__ import annotations

import random

from app.kinds.tiny_lm.domain.arith_corpus import Example, draw_examples
from app.kinds.tiny_lm.domain.arith_task import ANSWER, ANSWER_END, END, SEP, THINK, THINK_END, write_number
from app.kinds.tiny_lm.domain.sums_task import SumPrompt, make_sum_prompts, running_steps, write_step, write_steps

# Shares of each habit in the corpus.
MIX = {"guess": 0.62, "stepwise": 0.12, "slip": 0.04, "recheck": 0.03, "mixed": 0.07, "unformatted": 0.12}
# How often the corpus's one-jump guesses are right, by the number of numbers summed.
GUESS_RIGHT = {2: 0.9, 3: 0.55, 4: 0.35, 5: 0.2, 6: 0.1}


def other(script: str) -> str:
    return "letters" if script == "digits" else "digits"


def guess_value(prompt: SumPrompt, rng: random.Random) -> int:
    if rng.random() < GUESS_RIGHT[prompt.difficulty]:
        return prompt.answer
    return max(1, prompt.answer + rng.choice((-3, -2, -1, 1, 2, 3)))


def _template(think: str, answer: int, script: str) -> str:
    return f"{THINK}{think}{THINK_END}{ANSWER}{write_number(answer, script)}{ANSWER_END}{END}"


def _slipped(prompt: SumPrompt, rng: random.Random, recheck: bool) -> str:
    """Running sums with one step's total off by one or ten; with `recheck`, that step is written
    again right and the sum goes on from there, otherwise the slip carries to the answer."""
    steps = running_steps(prompt.operands)
    at = rng.randrange(len(steps))
    left, right, total = steps[at]
    wrong = max(0, total + rng.choice((-10, -1, 1, 10)))
    script = prompt.script
    if recheck:
        parts = [*steps[:at], (left, right, wrong), *steps[at:]]
        return _template(write_steps(parts, script), prompt.answer, script)
    out, carried = list(steps[:at]), wrong
    out.append((left, right, wrong))
    for x in prompt.operands[at + 2:]:
        out.append((carried, x, carried + x))
        carried += x
    return _template(write_steps(out, script), carried, script)


def completion(prompt: SumPrompt, kind: str, rng: random.Random) -> str:
    """One completion of the given habit, as text ending with the end token."""
    own = prompt.script
    if kind == "guess":
        value = guess_value(prompt, rng)
        return _template(write_number(value, own), value, own)
    if kind == "stepwise":
        return _template(write_steps(running_steps(prompt.operands), own), prompt.answer, own)
    if kind in ("slip", "recheck"):
        return _slipped(prompt, rng, recheck=kind == "recheck")
    if kind == "mixed":  # right, but the steps drift into the other script from some point on
        steps = running_steps(prompt.operands)
        at = rng.randrange(len(steps))
        think = SEP.join(write_step(*s, own if i < at else other(own)) for i, s in enumerate(steps))
        return _template(think, prompt.answer, rng.choice((own, other(own))))
    if kind == "unformatted":  # the template ignored: a bare number, guessed
        return f"{write_number(guess_value(prompt, rng), own)}{END}"
    raise ValueError(f"unknown habit {kind!r}")


SumExample = Example[SumPrompt]


def build_sums_corpus(size: int, seed: int, prompt_pool: int = 4000) -> tuple[SumExample, ...]:
    """`size` examples over a pool of seeded prompts, habits drawn with the shares of MIX."""
    return draw_examples(size, random.Random(seed), make_sum_prompts(prompt_pool, seed), MIX, completion)
