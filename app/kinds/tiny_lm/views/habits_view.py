"""What a path starts from and what it ends with, on the running-sums task: the start
model's habits measured (step-by-step share by difficulty, how often each habit is right, the
re-check), and one 6-number prompt's completions by the first and the final model, each marked.

The habits are why R1-Zero can grow longer at all: a reward can only favour what the base already
sometimes does (Oat-zero: the behaviours are present before RL), so the page shows that it does.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.tiny_lm.domain.arith_task import rewards
from app.kinds.tiny_lm.domain.sums_task import habit, read_sum_prompt
from app.kinds.tiny_lm.engine.lm_paths import PathResult
from app.kinds.tiny_lm.engine.sums_measure import Stats
from app.kinds.tiny_lm.views.length_view import along_path, pct

RECHECK_EXAMPLE = "8+9=18 8+9=17"
START_TITLE = {"r1-zero": "What the base does before RL",
               "r1": "What the base does before the cold start",
               "distillation": "What the student does before it learns from R1"}
START_NAME = {"r1-zero": "the base", "r1": "the base", "distillation": "the student's start"}


@dataclass(frozen=True)
class HabitRow:
    n: int
    stepwise: str  # share of its answers that work step by step
    right_stepwise: str  # accuracy of those
    right_guess: str  # accuracy of the formatted ones that jump to an answer


@dataclass(frozen=True)
class StartHabits:
    title: str
    sentence: str
    rows: tuple[HabitRow, ...]


def habits_sentence(name: str, s: Stats, by: dict[int, Stats]) -> str:
    sizes = sorted(by)
    where = ""
    if sizes:
        lo, hi = sizes[0], sizes[-1]
        where = f" (on {lo}-number sums {pct(by[lo].stepwise_share)}, on {hi}-number sums {pct(by[hi].stepwise_share)})"
    text = f"Before any training step, {name} writes running sums in {pct(s.stepwise_share)} of its answers{where}"
    a, g = s.accuracy_stepwise, s.accuracy_guess
    if a is None:
        text += "; none of its sampled answers works step by step."
    elif g is None:
        text += f"; those are right {pct(a)} of the time, and it never guessed in the template."
    else:
        text += f"; those are right {pct(a)} of the time, its guesses {pct(g)}"
        text += (": working step by step already pays, which is what a reward on the answer can find."
                 if a > g else ": working step by step does not pay more than guessing here.")
    text += f" {pct(s.recheck_share)} of its answers re-check a step (a step recomputed right after a slip, " \
            f"e.g. {RECHECK_EXAMPLE})."
    return text


def build_start_habits(result: PathResult) -> StartHabits:
    first = along_path(result).points[0][2]
    by = dict(first.by_difficulty)
    rows = tuple(HabitRow(n, pct(st.stepwise_share), pct(st.accuracy_stepwise), pct(st.accuracy_guess))
                 for n, st in sorted(by.items()))
    return StartHabits(START_TITLE.get(result.path, "The start model"),
                       habits_sentence(START_NAME.get(result.path, "the start model"), first.stats, by), rows)


@dataclass(frozen=True)
class ShowcaseItem:
    text: str
    right: bool
    habit: str  # "step by step (5 steps, 1 re-check)" | "guess" | "no template"


@dataclass(frozen=True)
class Showcase:
    prompt: str
    answer: int
    numbers: int
    early_name: str
    early: tuple[ShowcaseItem, ...]
    late: tuple[ShowcaseItem, ...]

    @staticmethod
    def tally(items: tuple[ShowcaseItem, ...]) -> str:
        right = sum(i.right for i in items)
        steps = sum(i.habit.startswith("step") for i in items)
        return f"{right} of {len(items)} right, {steps} step by step"


def mark(prompt_text: str, text: str) -> ShowcaseItem | None:
    prompt = read_sum_prompt(prompt_text)
    if prompt is None:
        return None
    parts, h = rewards(prompt, text), habit(text)
    if h.stepwise:
        what = f"step by step ({h.steps} step{'s' if h.steps != 1 else ''}"
        what += f", {h.rechecks} re-check{'s' if h.rechecks != 1 else ''})" if h.rechecks else ")"
    elif parts.format:
        what = "guess"
    else:
        what = "no template"
    return ShowcaseItem(text, parts.accuracy == 1, what)


def build_showcase(result: PathResult) -> Showcase | None:
    prompt_text, early, late = result.showcase
    prompt = read_sum_prompt(prompt_text)
    if prompt is None or not early or not late:
        return None
    e = tuple(m for t in early if (m := mark(prompt_text, t)) is not None)
    la = tuple(m for t in late if (m := mark(prompt_text, t)) is not None)
    return Showcase(prompt_text, prompt.answer, prompt.difficulty, START_NAME.get(result.path, "the first model"),
                    e, la)
