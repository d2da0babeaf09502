"""One metric over a run's steps, cut to what a chart can draw without losing what a reader looks for.

A run of 10,000 logged steps drawn on a 600-pixel chart needs ~2 points per pixel column at most. Plain
striding would drop the one step where KL spiked, so the points are kept by the M4 rule (Jugel et al.,
"M4: a visualization-oriented time series data aggregation", VLDB 2014): the steps are cut into
`buckets` runs of consecutive points, and each keeps its first, last, lowest and highest point (in step
order, each at most once). The chart's extremes are then the data's extremes, every spike included, and
a non-finite value (a NaN loss) is kept as a point of its own, never averaged away. `window` gives the
full resolution of a zoomed range.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[int, float]  # (step, value)


def downsample(points: Sequence[Point], buckets: int) -> list[Point]:
    """At most 4 × `buckets` of `points` (in step order): every bucket's first, last, min and max, and every
    non-finite point. Fewer points than 4 × buckets come back whole."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    n = len(points)
    if n <= 4 * buckets:
        return list(points)
    keep: set[int] = set()
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        if lo >= hi:
            continue
        finite = [i for i in range(lo, hi) if math.isfinite(points[i][1])]
        keep.update((lo, hi - 1))
        keep.update(i for i in range(lo, hi) if not math.isfinite(points[i][1]))
        if finite:
            keep.add(min(finite, key=lambda i: points[i][1]))
            keep.add(max(finite, key=lambda i: points[i][1]))
    return [points[i] for i in sorted(keep)]


def window(points: Sequence[Point], first: int, last: int) -> list[Point]:
    """The points with first ≤ step ≤ last, every one (a zoomed chart's full resolution)."""
    if first > last:
        raise ValueError(f"an empty window: steps {first} to {last}")
    return [p for p in points if first <= p[0] <= last]


__all__ = ["Point", "downsample", "window"]
