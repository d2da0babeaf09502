"""TensorBoard's scalar smoothing, for the run explorer's `?smooth=` (issue 50).

An exponential moving average with TensorBoard's debiasing (tensorboard/webapp/widgets/line_chart_v2/
data_transformer.ts, `classicSmoothing`): with weight w, `last = last·w + (1 − w)·value` from last = 0, and the
k-th finite value's smoothed value is last / (1 − w^k), so the first points are not pulled towards 0. A
non-finite value (a NaN loss) is passed through and leaves the average as it was; a constant series is its
own smoothing (no rounding drift). w = 0 is the raw series.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

MAX_WEIGHT = 0.99  # TensorBoard's slider stops at 0.999; past 0.99 a 120-step run is one flat line


def ema(values: Sequence[float], weight: float) -> list[float]:
    if not 0.0 <= weight <= MAX_WEIGHT:
        raise ValueError(f"the smoothing weight must be in [0, {MAX_WEIGHT}], got {weight}")
    if weight == 0.0 or not values or all(v == values[0] for v in values):
        return [float(v) for v in values]
    last, k, out = 0.0, 0, []
    for v in values:
        if not math.isfinite(v):
            out.append(float(v))
            continue
        last = last * weight + (1.0 - weight) * v
        k += 1
        out.append(last / (1.0 - weight ** k))
    return out


__all__ = ["MAX_WEIGHT", "ema"]
