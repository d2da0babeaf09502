"""One quantity of two recorded steps as an overlaid histogram on shared bins (the run diff, issue 34).

Step a is drawn as filled bars, step b as an outline over them: where b's outline sits above a's bars, b has
more of its values in that bin. Each bar is the share of that step's own values (so steps with different
counts compare), in percent. Colour is not the only carrier: filled against outlined, and said in the caption.
The viewBox is narrower than a 390 px phone's content box, so 12 px labels never draw under 11 px.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.runs.domain.two_sample import SharedHistogram
from app.views.charts.frame import Box, PlotFrame, Tick, frame_fields, nice_ticks, r2, tick_label
from app.views.numbers import significant

WIDTH, HEIGHT = 340.0, 150.0
LEFT_MIN, RIGHT, TOP, BOTTOM = 40.0, 326.0, 8.0, 128.0
CHAR_WIDTH = 7.2  # a 12 px tick label's character, with a margin


@dataclass(frozen=True)
class DiffHistogram(PlotFrame):
    bars_a: tuple[Box, ...]  # step a: one filled bar per bin (none where the bin is empty)
    outline_b: str  # step b: the outline's path, along the tops of its bars
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_tick_label_y: float
    y_tick_label_x: float
    summary: str  # the chart in words (its accessible name)
    tails: str  # "" or what the end bins also hold


def _shares(counts: tuple[int, ...]) -> list[float]:
    total = sum(counts)
    return [100.0 * c / total if total else 0.0 for c in counts]


def diff_histogram(name: str, step_a: int, step_b: int, h: SharedHistogram) -> DiffHistogram:
    a, b = _shares(h.counts_a), _shares(h.counts_b)
    top = max(max(a), max(b), 1.0)
    yt = nice_ticks(0.0, top, 3)
    step = yt[1] - yt[0] if len(yt) > 1 else top
    while yt[-1] < top - 1e-9:  # the top tick above the tallest bar: its height reads off the grid
        yt.append(float(f"{yt[-1] + step:.12g}"))
    y_hi = yt[-1]
    y_labels = [tick_label(v, yt) + "%" for v in yt]
    left = max(LEFT_MIN, max(len(s) for s in y_labels) * CHAR_WIDTH + 8)
    lo, hi = h.edges[0], h.edges[-1]

    def sx(v: float) -> float:
        return r2(left + (v - lo) / (hi - lo) * (RIGHT - left))

    def sy(share: float) -> float:
        return r2(BOTTOM - share / y_hi * (BOTTOM - TOP))

    bars = tuple(Box(sx(h.edges[i]), sy(s), r2(sx(h.edges[i + 1]) - sx(h.edges[i])), r2(BOTTOM - sy(s)))
                 for i, s in enumerate(a) if s > 0)
    path = [f"M{sx(lo)} {BOTTOM}"]
    for i, s in enumerate(b):
        path.append(f"L{sx(h.edges[i])} {sy(s)}L{sx(h.edges[i + 1])} {sy(s)}")
    path.append(f"L{sx(hi)} {BOTTOM}")
    xt = nice_ticks(lo, hi, 4)
    tails = []
    if h.below:
        tails.append(f"{h.below} value{'s' if h.below > 1 else ''} below {significant(lo)} in the first bin")
    if h.above:
        tails.append(f"{h.above} value{'s' if h.above > 1 else ''} above {significant(hi)} in the last bin")
    peak_a = max(range(len(a)), key=lambda i: a[i])
    peak_b = max(range(len(b)), key=lambda i: b[i])

    def bin_words(i: int) -> str:
        return f"{significant(h.edges[i])} to {significant(h.edges[i + 1])}"

    summary = (f"{name}: {len(a)} shared bins from {significant(lo)} to {significant(hi)}; step {step_a} (filled) "
               f"peaks at {bin_words(peak_a)} with {a[peak_a]:.0f}% of its values, step {step_b} (outline) at "
               f"{bin_words(peak_b)} with {b[peak_b]:.0f}%")
    return DiffHistogram(
        **frame_fields(WIDTH, HEIGHT, left, RIGHT, TOP, BOTTOM), bars_a=bars, outline_b="".join(path),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), label) for v, label in zip(yt, y_labels, strict=True)),
        x_tick_label_y=r2(BOTTOM + 15), y_tick_label_x=r2(left - 5), summary=summary,
        tails=("The end bins also hold the tails: " + "; ".join(tails) + ".") if tails else "")


__all__ = ["HEIGHT", "WIDTH", "DiffHistogram", "diff_histogram"]
