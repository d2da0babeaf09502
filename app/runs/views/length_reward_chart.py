"""Length against reward as a scatter (the run explorer's diagnostics, issue 34; the numbers: domain/length_reward.py).

x is the step's mean completion length, y its mean reward; each logged step is a dot, shaded by when it came (the
first third light, the last third dark, as the caption says: the shade is not the only carrier, the arrow is). An
arrow runs from the first tenth's mean point to the last tenth's: the run's whole movement in one mark. A run of
more than MAX_DOTS steps in view is drawn as MAX_DOTS dots, each the mean of a run of consecutive steps (said in the
caption: a scatter has no extreme to keep, as a line's M4 cut does); up to DOT_LIMIT dots each links to its step.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.runs.domain.length_reward import LengthReward
from app.views.charts.frame import PlotFrame, Tick, frame_fields, nice_ticks, r2, tick_label
from app.views.numbers import significant

MAX_DOTS = 300
DOT_LIMIT = 120
WIDTH, HEIGHT = 400.0, 230.0
LEFT_MIN, RIGHT, TOP, BOTTOM = 50.0, 386.0, 10.0, 192.0
CHAR_WIDTH = 7.2  # a 12 px tick label's character, with a margin


@dataclass(frozen=True)
class ScatterDot:
    x: float
    y: float
    phase: str  # "early" | "middle" | "late": a third of the steps in view each
    label: str  # "step 12: length 431, reward 0.62" (or "steps 12–40: …"), its tooltip and accessible name
    url: str | None  # its step selected, while the dots are few enough to link


@dataclass(frozen=True)
class LengthRewardChart(PlotFrame):
    length_name: str
    reward_name: str
    dots: tuple[ScatterDot, ...]
    arrow: tuple[float, float, float, float]  # first tenth's mean point -> last tenth's, in SVG units
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_tick_label_y: float
    y_tick_label_x: float
    x_label: str
    x_label_y: float
    y_label: str
    sentence: str
    summary: str
    caption: str


def _range(values: np.ndarray) -> tuple[float, float]:
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        pad = max(abs(hi) * 0.1, 0.5)
        return lo - pad, hi + pad
    pad = 0.06 * (hi - lo)
    return lo - pad, hi + pad


def _buckets(n: int) -> list[tuple[int, int]]:
    """[start, end) index runs: one a step while n ≤ MAX_DOTS, else MAX_DOTS runs of consecutive steps."""
    if n <= MAX_DOTS:
        return [(i, i + 1) for i in range(n)]
    edges = np.linspace(0, n, MAX_DOTS + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def length_reward_chart(lr: LengthReward, step_url: Callable[[int], str]) -> LengthRewardChart:
    x, y = np.asarray(lr.lengths), np.asarray(lr.rewards)
    x_lo, x_hi = _range(x)
    y_lo, y_hi = _range(y)
    yt = nice_ticks(y_lo, y_hi, 4)
    xt = nice_ticks(x_lo, x_hi, 5)
    left = max(LEFT_MIN, max(len(tick_label(v, yt)) for v in yt) * CHAR_WIDTH + 22)  # room for the y label too

    def sx(v: float) -> float:
        return r2(left + (v - x_lo) / (x_hi - x_lo) * (RIGHT - left))

    def sy(v: float) -> float:
        return r2(BOTTOM - (v - y_lo) / (y_hi - y_lo) * (BOTTOM - TOP))

    runs = _buckets(len(lr.steps))
    linked = len(runs) <= DOT_LIMIT
    unit = "characters" if lr.length_name.endswith("chars_mean") else "tokens"
    dots = []
    for k, (a, b) in enumerate(runs):
        mx, my = float(x[a:b].mean()), float(y[a:b].mean())
        steps = f"step {lr.steps[a]}" if b - a == 1 else f"steps {lr.steps[a]}–{lr.steps[b - 1]} (mean)"
        phase = ("early", "middle", "late")[min(2, 3 * k // len(runs))]
        dots.append(ScatterDot(sx(mx), sy(my), phase, f"{steps}: length {significant(mx, 4)} {unit}, reward "
                               f"{significant(my, 4)}", step_url(lr.steps[a]) if linked and b - a == 1 else None))
    arrow = (sx(lr.early[0]), sy(lr.early[1]), sx(lr.late[0]), sy(lr.late[1]))
    cut = (f"All {len(lr.steps)} steps that logged both, one dot each"
           if len(runs) == len(lr.steps) else
           f"{len(lr.steps)} steps that logged both, drawn as {len(runs)} dots, each the mean of a run of "
           "consecutive steps (zoom for one dot a step)")
    caption = (f"{cut}: light dots the first third of them, dark the last third; the arrow goes from the first "
               f"tenth's mean point to the last tenth's. x: {lr.length_name}, y: {lr.reward_name}.")
    summary = (f"{lr.reward_name} against {lr.length_name} over {len(lr.steps)} steps: from length "
               f"{significant(lr.early[0])} and reward {significant(lr.early[1])} (first tenth) to length "
               f"{significant(lr.late[0])} and reward {significant(lr.late[1])} (last tenth)")
    return LengthRewardChart(
        **frame_fields(WIDTH, HEIGHT, left, RIGHT, TOP, BOTTOM), length_name=lr.length_name,
        reward_name=lr.reward_name, dots=tuple(dots), arrow=arrow,
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(BOTTOM + 14), y_tick_label_x=r2(left - 5),
        x_label=f"mean completion length ({unit})", x_label_y=r2(BOTTOM + 32), y_label="mean reward",
        sentence=lr.sentence, summary=summary, caption=caption)


__all__ = ["DOT_LIMIT", "MAX_DOTS", "LengthRewardChart", "length_reward_chart"]
