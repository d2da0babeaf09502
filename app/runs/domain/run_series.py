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

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

Point = tuple[int, float]  # (step, value)


def downsample(points: Sequence[Point], buckets: int) -> list[Point]:
    """At most 4 × `buckets` of `points` (in step order): every bucket's first, last, min and max, and every
    non-finite point. Fewer points than 4 × buckets come back whole."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    n = len(points)
    if n <= 4 * buckets:
        return list(points)
    # numpy, not a Python loop over every point: a 10,000-step run's page cuts ~20 metrics per view (issue 50).
    # Bucket b is points[b * n // buckets : (b + 1) * n // buckets], never empty here (n > 4 × buckets).
    values = np.fromiter(map(itemgetter(1), points), dtype=np.float64, count=n)
    finite = np.isfinite(values)
    starts = np.arange(buckets) * n // buckets
    ends = np.append(starts[1:], n)
    bucket = np.repeat(np.arange(buckets), ends - starts)
    keep = ~finite  # every non-finite point
    keep[starts] = keep[ends - 1] = True  # every bucket's first and last
    # each bucket's lowest and highest finite point, the first of equals as min()/max() take it: lexsort is
    # stable, so within a bucket equal values stay in step order. A bucket with no finite point is kept whole
    # already (every point non-finite), so the point picked there changes nothing.
    keep[np.lexsort((np.where(finite, values, np.inf), bucket))[starts]] = True
    keep[np.lexsort((np.where(finite, -values, np.inf), bucket))[starts]] = True
    return [points[i] for i in np.flatnonzero(keep).tolist()]


def window(points: Sequence[Point], first: int, last: int) -> list[Point]:
    """The points with first ≤ step ≤ last, every one (a zoomed chart's full resolution)."""
    if first > last:
        raise ValueError(f"an empty window: steps {first} to {last}")
    if points and first <= points[0][0] and points[-1][0] <= last:  # the whole run (the first view): no scan
        return list(points)
    return [p for p in points if first <= p[0] <= last]


__all__ = ["Point", "downsample", "window"]
