"""A metric over 10,000 steps cut for a chart (app/runs/domain/run_series.py): the extremes, the first
and last steps and every non-finite value kept, in step order; the zoomed window whole."""
from __future__ import annotations

import math
import random

import pytest

from app.runs.domain.run_series import downsample, window


def noisy(n: int) -> list[tuple[int, float]]:
    rng = random.Random(4)
    return [(s, math.sin(s / 300) + 0.05 * rng.random()) for s in range(n)]


def test_ten_thousand_steps_keep_every_extreme_and_a_single_spike():
    points = noisy(10_000)
    points[7_321] = (7_321, 9.0)  # one step's spike
    points[2_000] = (2_000, -9.0)
    kept = downsample(points, 150)
    assert len(kept) <= 600 and kept == sorted(kept)
    assert set(kept) <= set(points)
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert (7_321, 9.0) in kept and (2_000, -9.0) in kept
    for b in range(150):  # each bucket's own min and max survive, so no zoom level loses a bucket's range
        bucket = points[b * 10_000 // 150:(b + 1) * 10_000 // 150]
        assert min(bucket, key=lambda p: p[1]) in kept and max(bucket, key=lambda p: p[1]) in kept


def test_non_finite_values_are_kept_and_never_taken_as_extremes():
    points = noisy(5_000)
    points[100] = (100, math.nan)
    points[101] = (101, math.inf)
    kept = downsample(points, 50)
    steps = [s for s, _ in kept]
    assert 100 in steps and 101 in steps
    finite = [v for _, v in kept if math.isfinite(v)]
    assert max(finite) == max(v for _, v in points if math.isfinite(v))


def test_a_short_series_comes_back_whole_and_the_window_is_full_resolution():
    points = noisy(100)
    assert downsample(points, 25) == points
    assert window(noisy(10_000), 500, 520) == noisy(10_000)[500:521]
    with pytest.raises(ValueError):
        downsample(points, 0)
    with pytest.raises(ValueError):
        window(points, 5, 4)
