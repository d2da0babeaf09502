"""One logged metric over a run's steps as a small SVG chart (issue 34's explorer).

The points come cut by M4 (domain/run_series.py: every bucket's first, last, lowest and highest point),
so a 10,000-step run draws at most 4 × BUCKETS points and its spikes are the data's. With few points in
view (DOT_LIMIT: a short run, or a zoomed window) each point is a dot that links to its step; above
that, the line alone, and the page's zoom brings the dots back. Non-finite values (a NaN loss) cannot be
drawn on a y axis: each is a ✕ on the plot's top edge at its step, and the caption names its steps.
Vertical marks: the selected step, and the steps the findings point at (each a link).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.kinds.step_record.domain.run_series import Point, downsample
from app.views.charts.frame import PlotFrame, Tick, frame_fields, nice_ticks, r2, tick_label
from app.views.numbers import significant

BUCKETS = 150
DOT_LIMIT = 120
WIDTH, HEIGHT = 400.0, 136.0
# LEFT is the least left margin (it grows with the y labels); RIGHT leaves the last x label room
LEFT, RIGHT, TOP, BOTTOM = 50.0, 386.0, 10.0, 118.0
CHAR_WIDTH = 7.2  # a tick label's digit at 12 px, with a margin: labels like 0.00835 must not be cut at the edge


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    step: int
    label: str  # "step 12: 0.431", its accessible name and tooltip
    url: str
    selected: bool


@dataclass(frozen=True)
class StepMark:
    x: float
    step: int
    kind: str  # "selected" | "finding" | "recorded" (a step with its step record: a notch on the x axis)
    label: str
    url: str


@dataclass(frozen=True)
class RunChart(PlotFrame):
    key: str  # the metric's name as logged
    slug: str  # for ids: the name with every non-alphanumeric run as "-"
    sentence: str
    points_svg: str  # the polyline's points ("" when no finite value is in view)
    dots: tuple[Dot, ...]
    not_finite: tuple[Dot, ...]  # ✕ marks on the top edge
    marks: tuple[StepMark, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_tick_label_y: float
    y_tick_label_x: float
    zero_y: float | None
    summary: str  # the chart said in words (aria-label)
    caption: str
    logged: int  # points in view before downsampling
    drawn: int


def slug(name: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in name.lower())
    return "-".join(p for p in out.split("-") if p) or "metric"


def _y_range(values: Sequence[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        pad = max(abs(hi) * 0.1, 0.5)
        return lo - pad, hi + pad
    pad = 0.08 * (hi - lo)
    return lo - pad, hi + pad


def run_chart(name: str, sentence: str, points: Sequence[Point], x_range: tuple[int, int],
              step_url: Callable[[int], str], selected: int | None = None,
              finding_steps: Sequence[tuple[int, str]] = (), recorded: Sequence[int] = ()) -> RunChart:
    """`points`: the metric's (step, value) inside `x_range`, every one; cut here for drawing."""
    drawn = downsample(points, BUCKETS)
    finite = [(s, v) for s, v in drawn if math.isfinite(v)]
    x_lo, x_hi = x_range
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = _y_range([v for _, v in finite]) if finite else (0.0, 1.0)

    yt = nice_ticks(y_lo, y_hi, 4)
    left = max(LEFT, max(len(tick_label(v, yt)) for v in yt) * CHAR_WIDTH + 10)

    def sx(step: float) -> float:
        return r2(left + (step - x_lo) / (x_hi - x_lo) * (RIGHT - left))

    def sy(v: float) -> float:
        return r2(BOTTOM - (v - y_lo) / (y_hi - y_lo) * (BOTTOM - TOP))

    with_dots = len(drawn) <= DOT_LIMIT
    dots = tuple(Dot(sx(s), sy(v), s, f"step {s}: {significant(v, 4)}", step_url(s), s == selected)
                 for s, v in finite) if with_dots else ()
    bad = tuple(Dot(sx(s), TOP, s, f"step {s}: {significant(v)}", step_url(s), s == selected)
                for s, v in drawn if not math.isfinite(v))
    marks = [StepMark(sx(s), s, "finding", f"{rule} at step {s}", step_url(s))
             for s, rule in finding_steps if x_lo <= s <= x_hi and s != selected]
    marks += [StepMark(sx(s), s, "recorded", f"step {s}: recorded (its record opens from the step's table)",
                       step_url(s)) for s in recorded if x_lo <= s <= x_hi]
    if selected is not None and x_lo <= selected <= x_hi:
        marks.append(StepMark(sx(selected), selected, "selected", f"step {selected}, selected", step_url(selected)))
    xt = nice_ticks(x_lo, x_hi, 5)
    xt = [t for t in xt if float(t).is_integer()] or [float(x_lo), float(x_hi)]
    if finite:
        lo = min(finite, key=lambda p: p[1])
        hi = max(finite, key=lambda p: p[1])
        summary = (f"{name} over steps {points[0][0]} to {points[-1][0]}: first {significant(finite[0][1])}, last "
                   f"{significant(finite[-1][1])}, lowest {significant(lo[1])} at step {lo[0]}, highest "
                   f"{significant(hi[1])} at step {hi[0]}")
    else:
        summary = f"{name}: no finite value in steps {x_lo} to {x_hi}"
    cut = (f"{len(drawn)} of its {len(points)} logged points drawn (each run of steps keeps its first, last, "
           "lowest and highest: every extreme is here); zoom in for all of them."
           if len(drawn) < len(points) else f"All {len(points)} logged points.")
    if bad:
        cut += (f" ✕ on the top edge: not a number at step{'s' if len(bad) > 1 else ''} "
                f"{', '.join(str(d.step) for d in bad[:8])}{'…' if len(bad) > 8 else ''}.")
    return RunChart(
        **frame_fields(WIDTH, HEIGHT, left, RIGHT, TOP, BOTTOM), key=name, slug=slug(name), sentence=sentence,
        points_svg=" ".join(f"{sx(s)},{sy(v)}" for s, v in finite), dots=dots, not_finite=bad,
        marks=tuple(marks),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(BOTTOM + 14), y_tick_label_x=r2(left - 5),
        zero_y=sy(0.0) if y_lo < 0 < y_hi else None, summary=summary, caption=cut,
        logged=len(points), drawn=len(drawn))


__all__ = ["BUCKETS", "DOT_LIMIT", "RunChart", "run_chart", "slug"]
