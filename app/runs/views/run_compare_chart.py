"""One metric of several runs overlaid on one x axis (issue 50's compare), as SVG geometry.

The explorer's chart (views/run_charts.py) draws one run; this draws up to 8 on its frame, ticks and y range rules
(`y_range` keeps each metric's domain: a share in [0, 1]). Each run's line is cut by the same M4 rule
(domain/run_series.py: every extreme kept), and carries its run's index: the stylesheet gives each index a colour of
the Okabe–Ito palette (safe for the common colour blindnesses) and a dash pattern, and the line a marker shape at a few
of its points, so the runs read apart in greyscale too. A non-finite value is a ✕ on the top edge in its run's class.
x is the step, or the tokens seen (TRL's num_tokens) at that step.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.runs.views.run_charts import BUCKETS, CHAR_WIDTH, cell, y_range
from app.runs.views.run_domains import FREE, Domain
from app.views.charts.frame import PlotFrame, Tick, frame_fields, nice_ticks, r2, tick_label

WIDTH, HEIGHT = 400.0, 150.0
LEFT, RIGHT, TOP, BOTTOM = 50.0, 384.0, 10.0, 122.0
MARKERS_PER_LINE = 5  # shapes along each line, so a run reads apart without colour
XPoint = tuple[float, float]  # (x: a step or the tokens seen, value)
SHAPES = ("circle", "square", "triangle", "diamond", "cross", "triangle-down", "plus", "star")


@dataclass(frozen=True)
class Marker:
    x: float
    y: float
    path: str  # an SVG path around (x, y): the run's shape


@dataclass(frozen=True)
class Line:
    index: int  # the run's place among the compared runs: its colour, dash and shape
    label: str  # the run's name in the legend ("A")
    points_svg: str
    markers: tuple[Marker, ...]
    bad: tuple[float, ...]  # x of each non-finite value (a ✕ on the top edge)
    last: str  # "A 0.0312 at step 120", the last logged value, said under the chart
    logged: int


@dataclass(frozen=True)
class OverlayChart(PlotFrame):
    key: str
    slug: str
    sentence: str
    lines: tuple[Line, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_tick_label_y: float
    y_tick_label_x: float
    zero_y: float | None
    summary: str
    caption: str
    coincide: str = ""  # "A and C logged the same values: their lines lie on one another." ("" when none do)
    absent: str = ""  # "Not logged by run B (TRL logs kl only when β > 0)." ("" when every run logged it)


def shape_path(shape: str, x: float, y: float, r: float = 3.2) -> str:
    """A marker's outline centred on (x, y), about 2r across."""
    a, b = r2(x), r2(y)
    if shape == "square":
        return f"M{r2(x - r)} {r2(y - r)}h{r2(2 * r)}v{r2(2 * r)}h{r2(-2 * r)}z"
    if shape == "triangle":
        return f"M{a} {r2(y - r * 1.15)}L{r2(x + r)} {r2(y + r * .85)}H{r2(x - r)}z"
    if shape == "triangle-down":
        return f"M{a} {r2(y + r * 1.15)}L{r2(x + r)} {r2(y - r * .85)}H{r2(x - r)}z"
    if shape == "diamond":
        return f"M{a} {r2(y - r * 1.2)}L{r2(x + r)} {b}L{a} {r2(y + r * 1.2)}L{r2(x - r)} {b}z"
    if shape in ("cross", "plus", "star"):
        d = f"M{r2(x - r)} {r2(y - r)}L{r2(x + r)} {r2(y + r)}M{r2(x + r)} {r2(y - r)}L{r2(x - r)} {r2(y + r)}"
        p = f"M{r2(x - r)} {b}H{r2(x + r)}M{a} {r2(y - r)}V{r2(y + r)}"
        return {"cross": d, "plus": p, "star": d + p}[shape]
    return f"M{r2(x - r)} {b}a{r} {r} 0 1 0 {r2(2 * r)} 0a{r} {r} 0 1 0 {r2(-2 * r)} 0z"  # circle


def compact(v: float) -> str:
    """A tokens tick: 0, 950, 12k, 1.5M, 2G."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def overlay_chart(name: str, slug: str, sentence: str, runs: Sequence[tuple[int, str, Sequence[XPoint], int]],
                  x_range: tuple[float, float], x_word: str = "step", domain: Domain = FREE) -> OverlayChart:
    """`runs`: (index, label, its (x, value) points cut by `m4`, x increasing, how many it logged) for each run that
    logged the metric."""
    drawn = [(i, run, m4(points), logged) for i, run, points, logged in runs]
    finite = [v for _, _, pts, _ in drawn for _, v in pts if math.isfinite(v)]
    x_lo, x_hi = x_range
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = y_range(finite, domain) if finite else (0.0, 1.0)
    yt = nice_ticks(y_lo, y_hi, 4)
    left = max(LEFT, max(len(tick_label(v, yt)) for v in yt) * CHAR_WIDTH + 10)

    def sx(x: float) -> float:
        return r2(left + (x - x_lo) / (x_hi - x_lo) * (RIGHT - left))

    def sy(v: float) -> float:
        return r2(BOTTOM - (v - y_lo) / (y_hi - y_lo) * (BOTTOM - TOP))

    lines = []
    for i, name_, pts, logged in drawn:
        good = [(x, v) for x, v in pts if math.isfinite(v)]
        step = max(1, len(good) // MARKERS_PER_LINE)
        offset = (i * step) // max(1, len(runs))  # each run's shapes start a little further on: fewer overlaps
        marks = tuple(Marker(sx(x), sy(v), shape_path(SHAPES[i % len(SHAPES)], sx(x), sy(v)))
                      for x, v in good[offset::step][:MARKERS_PER_LINE + 1])
        last = f"{name_} {cell(pts[-1][1])} at {x_word} {cell(pts[-1][0])}" if pts else f"{name_}: none"
        lines.append(Line(i, name_, " ".join(f"{sx(x)},{sy(v)}" for x, v in good), marks,
                          tuple(sx(x) for x, v in pts if not math.isfinite(v)), last, logged))
    xt = nice_ticks(x_lo, x_hi, 5)

    def label(v: float, ticks: Sequence[float]) -> str:
        return tick_label(v, ticks) if x_word == "step" else compact(v)

    cut = sum(len(p) for _, _, p, _ in drawn) < sum(n for *_, n in drawn)
    summary = f"{name} against {x_word}, {len(lines)} runs: " + "; ".join(
        f"run {ln.label} last {ln.last.split(' ', 1)[1]}" for ln in lines)
    caption = ("Each line cut to every run of steps' first, last, lowest and highest point (every extreme kept)."
               if cut else "Every logged point.")
    same: dict[tuple[XPoint, ...], list[str]] = {}
    for _, run, pts, _ in drawn:
        if pts:
            same.setdefault(tuple(pts), []).append(run)
    groups = [g for g in same.values() if len(g) > 1]
    coincide = " ".join(f"{', '.join(g[:-1])} and {g[-1]} logged the same values (one line, each run's markers "
                        "along it)." for g in groups)
    if any(ln.bad for ln in lines):
        caption += " ✕ on the top edge: not a number."
    return OverlayChart(
        **frame_fields(WIDTH, HEIGHT, left, RIGHT, TOP, BOTTOM), key=name, slug=slug, sentence=sentence,
        lines=tuple(lines),
        x_ticks=tuple(Tick(v, sx(v), label(v, xt)) for v in xt if x_lo <= v <= x_hi),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(BOTTOM + 14), y_tick_label_x=r2(left - 5),
        zero_y=sy(0.0) if y_lo < 0 < y_hi else None, summary=summary, caption=caption,
        coincide=coincide)


def m4(points: Sequence[XPoint], buckets: int = BUCKETS) -> list[XPoint]:
    """domain/run_series.py's `downsample`, the same points, in numpy: 4 runs of 10,000 steps × every metric is
    100 series per page. Each bucket's first and last, its first lowest and first highest finite point, and every
    non-finite point."""
    n = len(points)
    if n <= 4 * buckets:
        return list(points)
    values = np.fromiter((v for _, v in points), dtype=np.float64, count=n)
    bounds = (np.arange(buckets + 1, dtype=np.int64) * n) // buckets  # bucket b: bounds[b] <= i < bounds[b + 1]
    bucket = np.searchsorted(bounds, np.arange(n), side="right") - 1
    good = np.isfinite(values)
    keep = np.zeros(n, dtype=bool)
    starts = np.flatnonzero(np.diff(bucket, prepend=-1))
    keep[starts] = True
    keep[np.append(starts[1:] - 1, n - 1)] = True
    keep |= ~good
    for key in (np.where(good, values, np.inf), np.where(good, -values, np.inf)):  # lowest, then highest
        order = np.lexsort((key, bucket))  # stable: among equal values the first step
        first = order[np.flatnonzero(np.diff(bucket[order], prepend=-1))]
        keep[first[good[first]]] = True
    return [points[int(i)] for i in np.flatnonzero(keep)]


__all__ = ["SHAPES", "XPoint", "Line", "Marker", "OverlayChart", "compact", "m4", "overlay_chart", "shape_path"]
