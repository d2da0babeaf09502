"""Length against reward over a run (issue 34's diagnostics): did the answers grow as the reward rose?

DeepSeek-R1-Zero's answers grew longer as its accuracy rose (DeepSeek-R1 §2.2.4, its Figure 3); a brevity reward
or a length cap gives the opposite, and a run whose reward rises while its length sits still is learning something
else. So a run's mean completion length and mean reward, step by step, are set against each other: at every step
that logged both (finite), the Pearson correlation r of the two series, Spearman's ρ (r of their ranks, ties
averaged: a monotone but curved relation scores 1), and how each moved from the first tenth of those steps to the
last. The sentence says which way they went together, in words, with those numbers.

Which metrics: the first of LENGTHS and of REWARDS the log has. TRL logs `completions/mean_length` and `reward`;
UNIPO's files `response_length` and `reward`; the per-sample readers' `samples/reward_mean`, and
`samples/completion_chars_mean` (characters: verl's dumps hold text, not tokens). The relation of two series over
steps is not a cause: both may just follow the step (they do in most runs); the sentence says "together", never
"because".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.runs.domain.run_log import RunLog

LENGTHS = ("completions/mean_length", "response_length", "samples/completion_chars_mean")
REWARDS = ("reward", "samples/reward_mean")
TRUNCATION = ("completions/clipped_ratio", "tokens/truncated")  # the share of completions cut at the length limit
CAPPED = 0.5  # past this share cut in the last tenth, the length is the limit's, not the answers' own
MIN_STEPS = 5  # fewer steps logged both: no correlation is worth saying
CLEAR = 0.5  # |ρ| at or past this: the two moved together (or against each other) clearly
TENTH = 0.1


@dataclass(frozen=True)
class LengthReward:
    length_name: str
    reward_name: str
    steps: tuple[int, ...]  # the steps that logged both, finite, increasing
    lengths: tuple[float, ...]
    rewards: tuple[float, ...]
    pearson: float | None  # None where a series is constant (no correlation is defined)
    spearman: float | None
    early: tuple[float, float]  # (mean length, mean reward) over the first tenth of `steps` (at least one step)
    late: tuple[float, float]  # the same over the last tenth
    sentence: str
    late_truncated: float | None = None  # the share of completions cut at the length limit over the last tenth


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return float((dx * dy).sum()) / denominator if denominator > 0 else None


def ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, a tie taking the mean of the ranks it spans (as Spearman's ρ wants)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    out = np.empty(values.size)
    start = 0
    while start < values.size:
        end = start
        while end + 1 < values.size and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        out[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return out


def _both(log: RunLog, length: str, reward: str) -> tuple[list[int], list[float], list[float]]:
    lengths = dict(log.series(length))
    steps, xs, ys = [], [], []
    for step, r in log.series(reward):
        x = lengths.get(step)
        if x is not None and math.isfinite(x) and math.isfinite(r):
            steps.append(step)
            xs.append(x)
            ys.append(r)
    return steps, xs, ys


def length_reward(log: RunLog, first: int | None = None, last: int | None = None) -> LengthReward | None:
    """The relation over the steps in [first, last] (the explorer's window), or None when the log has no length and
    reward metric, or fewer than MIN_STEPS steps logged both."""
    length = next((n for n in LENGTHS if n in log.metrics), None)
    reward = next((n for n in REWARDS if n in log.metrics), None)
    if length is None or reward is None:
        return None
    steps, xs, ys = _both(log, length, reward)
    keep = [i for i, s in enumerate(steps) if (first is None or s >= first) and (last is None or s <= last)]
    if len(keep) < MIN_STEPS:
        return None
    x = np.array([xs[i] for i in keep], dtype=np.float64)
    y = np.array([ys[i] for i in keep], dtype=np.float64)
    kept_steps = tuple(steps[i] for i in keep)
    pearson = _pearson(x, y)
    spearman = _pearson(ranks(x), ranks(y))
    k = max(1, int(len(keep) * TENTH))
    early = (float(x[:k].mean()), float(y[:k].mean()))
    late = (float(x[-k:].mean()), float(y[-k:].mean()))
    unit = "characters" if length.endswith("chars_mean") else "tokens"
    flat = {(True, False): "the length never changed", (False, True): "the reward never changed"}.get(
        (bool(np.ptp(x) == 0), bool(np.ptp(y) == 0)), "neither length nor reward changed")
    sentence = _sentence(len(keep), kept_steps, pearson, spearman, early, late, k, unit, flat)
    cut = _late_truncation(log, kept_steps[-k:])
    if cut is not None and cut >= CAPPED:
        sentence += (f" But over the last {k} steps {100 * cut:.0f} % of completions were cut at the length limit: "
                     "their length is the limit's, not the answers' own.")
    return LengthReward(length, reward, kept_steps, tuple(map(float, x)), tuple(map(float, y)), pearson, spearman,
                        early, late, sentence, cut)


def _late_truncation(log: RunLog, steps: tuple[int, ...]) -> float | None:
    """The mean share of completions cut at the length limit over `steps`, from the first TRUNCATION metric logged."""
    name = next((n for n in TRUNCATION if n in log.metrics), None)
    if name is None:
        return None
    wanted = set(steps)
    values = [v for s, v in log.series(name) if s in wanted and math.isfinite(v)]
    return sum(values) / len(values) if values else None


def _num(v: float) -> str:
    return f"{v:.3g}"


def _sentence(n: int, steps: tuple[int, ...], pearson: float | None, spearman: float | None,
              early: tuple[float, float], late: tuple[float, float], k: int, unit: str, flat: str) -> str:
    """`flat`: which series is constant, said when no correlation is defined."""
    span = f"the first {k} of these steps" if k > 1 else f"step {steps[0]}"
    end = f"the last {k}" if k > 1 else f"step {steps[-1]}"
    moved = (f"Mean length {_num(early[0])} → {_num(late[0])} {unit} and mean reward {_num(early[1])} → "
             f"{_num(late[1])} from {span} to {end}.")
    if spearman is None or pearson is None:
        return f"Over {n} steps {flat}, so there is no relation to measure. {moved}"
    numbers = f"(Spearman ρ = {spearman:.2f}, Pearson r = {pearson:.2f}, over {n} steps)"
    if spearman >= CLEAR:
        how = (f"Length and reward rose and fell together {numbers}: longer answers came with more reward, "
               "R1-Zero's pattern (its answers grew as it learned); both may simply follow the step.")
    elif spearman <= -CLEAR:
        how = (f"Length and reward moved against each other {numbers}: as one rose the other fell, as when a "
               "brevity reward or a length cap pays for shorter answers, or long answers are cut and score 0.")
    else:
        how = f"Length and reward did not move together clearly {numbers}: |ρ| < {CLEAR}."
    return f"{how} {moved}"


__all__ = ["CAPPED", "CLEAR", "LENGTHS", "MIN_STEPS", "REWARDS", "LengthReward", "length_reward", "ranks"]
