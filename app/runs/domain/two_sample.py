"""Two samples of one quantity side by side (the diff of two recorded steps, issue 34): each one's summary, the
shift between them, the two-sample Kolmogorov–Smirnov distance and a histogram of both on shared bins. Plain
numpy in float64; no torch, no web.

The KS distance is max over x of |F_a(x) − F_b(x)|, each F the share of a sample at or below x: 0 when the two
samples have the same distribution, 1 when every value of one lies below every value of the other. It reads
the whole shape (a spread that doubled with an unchanged mean shows), and needs no bins.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BINS = 20
# A histogram spans the pooled values' 1st to 99th percentile when the full range is more than TAIL_SPAN times
# wider (a ratio of 40 among ratios near 1 would squash every other bar into one); the values outside are
# counted in the end bins, and the caption says how many.
TAIL_SPAN = 4.0
TAIL_PERCENTILES = (1.0, 99.0)


@dataclass(frozen=True)
class Summary:
    count: int
    mean: float
    p5: float
    p50: float
    p95: float
    min: float
    max: float


@dataclass(frozen=True)
class SharedHistogram:
    edges: tuple[float, ...]  # BINS + 1 edges, shared by both samples
    counts_a: tuple[int, ...]
    counts_b: tuple[int, ...]
    below: int  # values of both samples under edges[0], counted in the first bin (0 unless the tails were cut)
    above: int  # over edges[-1], counted in the last bin


@dataclass(frozen=True)
class TwoSamples:
    a: Summary | None  # None: no value (nothing recorded, or nothing scored, at that step)
    b: Summary | None
    mean_shift: float | None  # b − a
    median_shift: float | None
    ks: float | None
    histogram: SharedHistogram | None


def summarize(x: np.ndarray) -> Summary | None:
    if x.size == 0:
        return None
    p5, p50, p95 = np.percentile(x, (5.0, 50.0, 95.0))  # linear between order statistics (numpy's default)
    return Summary(int(x.size), float(np.mean(x)), float(p5), float(p50), float(p95), float(x.min()), float(x.max()))


def ks_distance(a: np.ndarray, b: np.ndarray, *, presorted: bool = False) -> float:
    """max |F_a − F_b|; the step functions only jump at the samples' values, so checking there is enough."""
    if not presorted:
        a, b = np.sort(a), np.sort(b)
    at = np.concatenate([a, b])
    fa = np.searchsorted(a, at, side="right") / a.size
    fb = np.searchsorted(b, at, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def shared_histogram(a: np.ndarray, b: np.ndarray, bins: int = BINS) -> SharedHistogram:
    pooled = np.concatenate([a, b])
    lo, hi = float(pooled.min()), float(pooled.max())
    cut_lo, cut_hi = (float(v) for v in np.percentile(pooled, TAIL_PERCENTILES))
    if cut_hi > cut_lo and (hi - lo) > TAIL_SPAN * (cut_hi - cut_lo):
        lo, hi = cut_lo, cut_hi
    if hi == lo:  # one value in both samples (ρ = 1 at every token of an on-policy step): a bar in the middle
        pad = max(abs(lo) * 0.05, 0.05)
        lo, hi = lo - pad, hi + pad
    edges = np.linspace(lo, hi, bins + 1)

    def counts(x: np.ndarray) -> tuple[int, ...]:
        return tuple(int(c) for c in np.histogram(np.clip(x, lo, hi), edges)[0])

    return SharedHistogram(tuple(float(e) for e in edges), counts(a), counts(b),
                           int((pooled < lo).sum()), int((pooled > hi).sum()))


def two_samples(a: np.ndarray | None, b: np.ndarray | None) -> TwoSamples:
    """`a`, `b`: finite float64 values, or None where the quantity was not recorded at that step."""
    a = np.sort(a) if a is not None else None  # once: the percentiles and the KS distance read sorted values
    b = np.sort(b) if b is not None else None
    sa = summarize(a) if a is not None else None
    sb = summarize(b) if b is not None else None
    if sa is None or sb is None or a is None or b is None:
        return TwoSamples(sa, sb, None, None, None, None)
    return TwoSamples(sa, sb, sb.mean - sa.mean, sb.p50 - sa.p50, ks_distance(a, b, presorted=True),
                      shared_histogram(a, b))


__all__ = ["BINS", "SharedHistogram", "Summary", "TwoSamples", "ks_distance", "shared_histogram", "summarize",
           "two_samples"]
