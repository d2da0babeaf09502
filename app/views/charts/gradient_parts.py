"""∂loss/∂log π of some rows (samples or tokens) as stacked bars: the part from the clipped advantage
term and the part from the KL penalty, laid from zero each in its own direction (a diverging stack),
with the total marked where they add up to. Numbers come from the engine (engine/grpo/gradient_parts.py),
never from here.

The chart is drawn to a viewBox and scales to its column (a 390 px phone included): no sideways scroll.
A part too small to see at this scale is still drawn MIN_SEGMENT wide, so a nonzero KL part never
vanishes (PARTS_WORDS says so); every row says its numbers in words too, and the KL segment is
hatched (not colour alone).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.charts.frame import CHAR_W, Box, Text, r2
from app.views.numbers import exact, param, significant

SURROGATE_LABEL = "from the clipped advantage term"
KL_LABEL = "from the KL penalty, β · ∂KL/∂log π"
# the legend in words, for every caption
PARTS_WORDS = ("Each bar is the sum of two parts: solid, from the clipped advantage term; hatched, from the KL "
               "penalty β · ∂KL/∂log π; ▲ marks their sum. A part too small for the scale is drawn a few "
               "units wide; the numbers are exact.")
WIDTH = 320  # user units; the svg scales to its column: at a 390 px phone ~331 px wide, so 11-unit text is ≥ 11 px
BAR_H = 12
LEGEND_H = 40
AXIS_H = 18
MIN_SEGMENT = 4.0
BOLD_W = 7.0  # rough width of one character of the rows' bold 11px labels


@dataclass(frozen=True)
class PartRow:
    """One row's ∂loss/∂log π and its two parts (surrogate + kl == total, as the engine gives them)."""
    label: str  # "#3 · 2 · readable correct", "'7' · completion 2, token 4"
    surrogate: float
    kl: float
    total: float
    clipped: bool = False  # the clip binds here: the surrogate part is 0 by construction
    key: str = ""  # what the row stands for, for links and tests ("3", "2:4")


@dataclass(frozen=True)
class Segment(Box):
    part: str  # "surrogate" | "kl"
    value: float


@dataclass(frozen=True)
class DrawnRow:
    row: PartRow
    label: Text
    values: Text  # "0 + (−0.00917) = −0.00917"
    segments: tuple[Segment, ...]
    total_x: float
    total_marker: str  # SVG path: a ▲ under the bar at the sum of the parts
    bar_y: float
    title: str  # the row's numbers in words: tooltip and accessible name
    exact_surrogate: str
    exact_kl: str
    exact_total: str


@dataclass(frozen=True)
class PartsChart:
    width: float
    height: float
    plot_left: float
    plot_right: float
    rows_top: float
    rows_bottom: float
    zero_x: float
    rows: tuple[DrawnRow, ...]
    legend: tuple[Text, ...]  # the two parts' names, beside their swatches
    swatches: tuple[Box, ...]  # surrogate's, then the KL's
    ticks: tuple[Text, ...]  # the range's ends and 0, under the rows
    summary: str
    caption: str


def kl_part_sentence(kl_placement: str, beta: float, unit: str, clipped_unit: str, effect: str) -> str:
    """What the hatched part is under these conventions, for a caption: 0 everywhere when the KL sits in
    the reward or β = 0, else why a clipped `clipped_unit` still moves (`effect`)."""
    if kl_placement == "reward":
        return f"Here the KL sits in the reward (a constant of π_old), so its part is 0 on every {unit}."
    if beta == 0:
        return f"Here β = 0, so the KL part is 0 on every {unit}."
    return (f"On a clipped {clipped_unit} the first part is exactly 0, yet the hatched part is not: with β = "
            f"{param(beta)} the KL penalty still {effect}.")


def _num(v: float) -> str:
    return significant(v, 3, strip=True)


def values_text(surrogate: float, kl: float, total: float) -> str:
    kl_text = f"({_num(kl)})" if kl < 0 else _num(kl)
    return f"{_num(surrogate)} + {kl_text} = {_num(total)}"


def _triangle(cx: float, tip: float) -> str:
    return f"M{r2(cx)} {r2(tip)} L{r2(cx + 4)} {r2(tip + 6)} L{r2(cx - 4)} {r2(tip + 6)} Z"


def _fit(label: str, chars: int) -> str:
    return label if len(label) <= chars else label[: max(1, chars - 1)].rstrip() + "…"


def parts_chart(rows: Sequence[PartRow], caption: str) -> PartsChart:
    """The stacked bars of `rows`, in their order; `caption` says which rows these are and why."""
    left, right = 4.0, WIDTH - 4.0
    lo = min([0.0, *(min(r.surrogate, 0) + min(r.kl, 0) for r in rows), *(r.total for r in rows)])
    hi = max([0.0, *(max(r.surrogate, 0) + max(r.kl, 0) for r in rows), *(r.total for r in rows)])
    span = (hi - lo) or 1.0

    def x(v: float) -> float:  # the bars keep a margin, so a part drawn MIN_SEGMENT wide at an end stays inside
        return left + MIN_SEGMENT + (v - lo) / span * (right - left - 2 * MIN_SEGMENT)

    zero = x(0.0)
    top = LEGEND_H
    drawn = []
    y = top
    for row in rows:
        text = values_text(row.surrogate, row.kl, row.total)
        # the label and its numbers on one line where both fit, else the numbers on a second line
        one_line = len(row.label) * BOLD_W + len(text) * CHAR_W + 12 <= right - left
        values_y = y + 11 if one_line else y + 25  # 14 below the label: 11-unit text boxes are ~13 tall
        bar_y = values_y + 3
        ends = {1: 0.0, -1: 0.0}  # each direction stacks from 0 outwards: the surrogate first, then the KL
        segments = []
        for part, value in (("surrogate", row.surrogate), ("kl", row.kl)):
            if value == 0 or not math.isfinite(value):
                continue
            sign = 1 if value > 0 else -1
            a, b = x(ends[sign]), x(ends[sign] + value)
            ends[sign] += value
            w = max(abs(b - a), MIN_SEGMENT)  # a too-small part grows away from zero, never across it
            start = a if sign > 0 else a - w
            segments.append(Segment(r2(start), r2(bar_y), r2(w), BAR_H, part, value))
        chars = int((right - left) / BOLD_W)  # the label is bold: wider characters
        title = (f"{row.label}: ∂loss/∂log π = {_num(row.total)}; {_num(row.surrogate)} {SURROGATE_LABEL}"
                 f"{' (clipped: 0)' if row.clipped else ''}, {_num(row.kl)} {KL_LABEL}")
        drawn.append(DrawnRow(row, Text(r2(left), r2(y + 11), _fit(row.label, chars)),
                              Text(r2(right), r2(values_y), text, "end"), tuple(segments), r2(x(row.total)),
                              _triangle(x(row.total), bar_y + BAR_H + 1), r2(bar_y), title,
                              exact(row.surrogate), exact(row.kl), exact(row.total)))
        y = bar_y + BAR_H + 10  # the ▲ under the bar, then the gap to the next row
    bottom = y
    ticks = [Text(r2(zero), r2(bottom + 12), "0", "middle")]
    # an end's label only where it clears the 0 (its text, a character of room either side)
    if lo < 0 and zero - left > (len(_num(lo)) + 2) * CHAR_W:
        ticks.append(Text(r2(left), r2(bottom + 12), _num(lo), "start"))
    if hi > 0 and right - zero > (len(_num(hi)) + 2) * CHAR_W:
        ticks.append(Text(r2(right), r2(bottom + 12), _num(hi), "end"))
    clipped = [r for r in rows if r.clipped]
    moved = sum(1 for r in clipped if r.surrogate == 0 and r.kl != 0)
    summary = (f"{len(rows)} rows of ∂loss/∂log π, each split into its part {SURROGATE_LABEL} and its part "
               f"{KL_LABEL}." + (f" On {moved} of the {len(clipped)} clipped rows the first part is 0 and "
                                 "the KL part still moves the answer." if clipped else ""))
    return PartsChart(WIDTH, r2(bottom + AXIS_H), left, right, top, bottom, r2(zero), tuple(drawn),
                      (Text(22, 13, SURROGATE_LABEL), Text(22, 30, KL_LABEL)),
                      (Box(4, 4, 13, 11), Box(4, 21, 13, 11)), tuple(ticks), summary, caption)
