"""Probability bars of a log-probability row (policy nodes in the inspector, the toy's first step).

Each row is its answer's label and its numbers, then the bar. The label and the numbers share one line
where both fit (the label left, the numbers right-aligned to the track's end); where any row's would not,
every row puts its numbers on a line of their own under its label, so no text runs into another and the
rows stay alike. Widths are estimated from the chart's 11-unit text, on the generous side.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.charts.frame import CHAR_W, Box, Hit, Tick, nice_ticks, r2, tick_label
from app.views.numbers import significant

BOLD_W = 7.0  # rough width of one character of the rows' bold 11-unit labels (as in charts/gradient_parts.py)
LINE_GAP = 10.0  # the least room between a label and its numbers on one line
LINE_H = 14.0  # baseline to baseline of the label and its numbers on two lines (11-unit text: boxes ~13 tall)


@dataclass(frozen=True)
class ProbabilityBar:
    index: int
    label: str  # "2 · readable correct ✓" (a ✓ marks the correct choice)
    correct: bool
    probability: float
    log_prob: float
    value_text: str  # "p = 0.412 (log p = −0.887)"
    value_x: float  # where the numbers are anchored: the track's end (one line) or its start (own line)
    value_y: float  # their baseline: the label's (one line) or the line under it
    value_anchor: str  # "end" on the label's line, "start" on a line of their own
    x: float
    y: float
    width: float
    height: float
    text_y: float  # baseline of the label/value line above the bar
    underline: Box  # drawn under the bar while its samples are highlighted
    hit: Hit  # the whole row: label, value and bar


@dataclass(frozen=True)
class ProbabilityBars:
    width: float
    height: float
    track_x: float
    track_width: float  # the width of p = 1
    value_x: float  # right edge of the track: value texts on the label's line end there
    stacked: bool  # the numbers on a line of their own under each label (they did not fit beside it)
    bars: tuple[ProbabilityBar, ...]
    grid: tuple[Tick, ...]  # vertical lines at p = 0, 0.25, … with labels underneath
    grid_top: float
    grid_bottom: float
    grid_label_y: float
    total: float  # Σp, 1 for a log-softmax row
    summary: str
    caption: str


def probability_bars(
    log_probs: Sequence[float],
    correct: int | None = None,
    labels: Sequence[str] | None = None,
    width: float = 380,
    bar_height: float = 22,
) -> ProbabilityBars:
    lps = [float(v) for v in log_probs]
    if not lps:
        raise ValueError("probability_bars needs at least one log-probability")
    if labels is not None and len(labels) != len(lps):
        raise ValueError(f"{len(labels)} labels for {len(lps)} log-probabilities")
    if correct is not None and not 0 <= correct < len(lps):
        raise ValueError(f"correct={correct} is not a choice index (0 … {len(lps) - 1})")
    pad, gap = 8.0, 10.0
    track_x, track_w = pad + 6, width - 2 * pad - 12  # room for the centred "0" and "1" under the ends
    probs = [math.exp(lp) if not math.isnan(lp) else float("nan") for lp in lps]
    names = [(str(labels[i]) if labels is not None else f"choice {i}") + (" ✓" if i == correct else "")
             for i in range(len(lps))]
    values = [f"p = {significant(p)} (log p = {significant(lp)})" for p, lp in zip(probs, lps, strict=True)]
    stacked = any(len(n) * BOLD_W + LINE_GAP + len(v) * CHAR_W > track_w for n, v in zip(names, values, strict=True))
    text_h = 18.0 + (LINE_H if stacked else 0.0)  # the label's line (and the numbers' own), then the bar
    row_h = text_h + bar_height + gap
    bars = []
    for i, (p, lp, label, value_text) in enumerate(zip(probs, lps, names, values, strict=True)):
        is_correct = i == correct
        top = pad + i * row_h
        frac = min(max(p, 0.0), 1.0) if not math.isnan(p) else 0.0
        label_y = top + 13
        bars.append(ProbabilityBar(
            index=i, label=label, correct=is_correct,
            probability=p, log_prob=lp, value_text=value_text,
            value_x=r2(track_x if stacked else track_x + track_w), value_y=r2(label_y + LINE_H if stacked else label_y),
            value_anchor="start" if stacked else "end",
            x=r2(track_x), y=r2(top + text_h), width=r2(frac * track_w), height=r2(bar_height),
            text_y=r2(label_y),
            underline=Box(r2(track_x), r2(top + text_h + bar_height + 2), r2(track_w), 3.0),
            hit=Hit(r2(track_x - 4), r2(top + 2), r2(track_w + 8), r2(text_h + bar_height + 3),
                    f"{label}: {value_text}", choice=i),
        ))
    grid_bottom = pad + len(lps) * row_h - gap
    ticks = nice_ticks(0.0, 1.0, 5)
    grid = tuple(Tick(t, r2(track_x + t * track_w), tick_label(t, ticks)) for t in ticks)
    total = math.fsum(b.probability for b in bars)
    listing = "; ".join(f"{b.label}: {significant(b.probability)}" for b in bars)
    caption = "Bar length is the probability; the full width is p = 1."
    if correct is not None:
        caption += " The hatched bar marked ✓ is the prompt's correct answer."
    return ProbabilityBars(
        width=r2(width), height=r2(grid_bottom + 22), track_x=r2(track_x), track_width=r2(track_w),
        value_x=r2(track_x + track_w), stacked=stacked, bars=tuple(bars), grid=grid, grid_top=r2(pad + text_h),
        grid_bottom=r2(grid_bottom),
        grid_label_y=r2(grid_bottom + 14), total=total,
        summary=f"Probabilities of {len(bars)} choices (sum {significant(total, 4)}): {listing}.",
        caption=caption,
    )
