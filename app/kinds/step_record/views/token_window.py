"""The token view of a recorded step at any scale: one window of one completion's tokens, each
with the step's number under it, below an overview strip of the whole group.

A G 16 x 4,096-token step is 65,536 tokens: drawing them all would be a page of megabytes, so the
page draws WINDOW tokens (record_query.py) and the strip, 64-token bins per completion shaded by
the same number, links each stretch to its window. Computes nothing but layout: every number is
the engine's (engine/recompute.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.kinds.step_record.engine.recompute import CompletionResult, Recomputed
from app.kinds.step_record.views.record_query import WINDOW
from app.views.numbers import ratio, readout
from app.views.tokens.metrics import ADVANTAGE, GRAD, KL, RATIO, WEIGHT, Metric, visible

BIN = 64  # tokens per cell of the overview strip


METRICS = {m.id: m for m in (
    Metric("logprob", "log π", "the log-probability the trained model gave the token at loss time (0 = certain)."),
    ADVANTAGE, RATIO, KL, WEIGHT, GRAD,
    Metric("entropy", "entropy H", "the policy's entropy at the token's position, as the framework recorded it."),
    Metric("change", "Δ ∂loss/∂log π", "the what-if convention's gradient minus the record's: how the other "
                                       "convention would have pushed this token differently."),
)}


def values(metric: str, c: CompletionResult, entropy: np.ndarray | None,
           other: CompletionResult | None) -> np.ndarray | None:
    """The metric per token of one completion; None where the record or the view has none."""
    pick: dict[str, Callable[[], np.ndarray | None]] = {
        "logprob": lambda: c.logp, "advantage": lambda: np.full(len(c.logp), c.advantage),
        "ratio": lambda: c.ratio, "kl": lambda: c.kl, "weight": lambda: c.weight, "grad": lambda: c.grad,
        "entropy": lambda: entropy, "change": lambda: None if other is None else other.grad - c.grad,
    }
    return pick[metric]()


@dataclass(frozen=True)
class Cell:
    position: int
    text: str  # visible()
    shown: str  # the number under it
    bar: float  # −1 … 1 from the strip's centre
    clipped: bool
    counted: bool  # the mask: 0 for a token outside the loss (a tool's output)
    card: str  # every number of the token, for its title and screen readers


@dataclass(frozen=True)
class Window:
    group: int
    completion: int
    start: int
    end: int
    length: int
    metric: Metric
    cells: tuple[Cell, ...]
    pages: tuple[tuple[str, str, bool], ...]  # (label, url, current) for each window of the completion

    @property
    def label(self) -> str:
        return f"tokens {self.start + 1}–{self.end} of {self.length}"


def _spell(metric: Metric, v: float) -> str:
    return ratio(v) if metric.id == "ratio" else readout(v)


def _bar(metric: Metric, v: float, top: float) -> float:
    return 0.0 if top == 0 else max(-1.0, min(1.0, metric.moved(v) / top))


def _top(metric: Metric, v: np.ndarray) -> float:
    """The farthest value from the centre (vectorised Metric.moved: a completion may be 65,536 tokens)."""
    if v.size == 0:
        return 0.0
    moved = np.log(np.maximum(v, 1e-300)) - math.log(metric.centre) if metric.log_scale else v - metric.centre
    return float(np.abs(moved).max())


def build_window(result: Recomputed, row: int, tokens: list[str], start: int, metric_id: str,
                 entropy: np.ndarray | None, other: Recomputed | None, url: Callable[[int], str]) -> Window:
    c = result.completions[row]
    metric = METRICS[metric_id]
    per_token = values(metric_id, c, entropy, other.completions[row] if other else None)
    if per_token is None:
        per_token = np.zeros(len(c.logp))
    n = len(c.logp)
    end = min(start + WINDOW, n)
    top = _top(metric, per_token)  # over the whole completion: bars compare across windows
    show_clip = metric_id in ("ratio", "grad", "change", "weight")
    cells = []
    for t in range(start, end):
        card = (f"token {t + 1} {visible(tokens[t])!s}: log π {readout(c.logp[t])}, ρ {ratio(c.ratio[t])}, "
                f"KL {readout(c.kl[t])}, w {readout(c.weight[t])}, ∂loss/∂log π {readout(c.grad[t])}"
                + (", clip binds ✂" if c.clip_low[t] or c.clip_high[t] else ""))
        cells.append(Cell(t, visible(tokens[t]), _spell(metric, float(per_token[t])),
                          _bar(metric, float(per_token[t]), top), show_clip and bool(c.clip_low[t] or c.clip_high[t]),
                          bool(c.mask[t]), card))
    pages = tuple((f"{s + 1}–{min(s + WINDOW, n)}", url(s), s == start) for s in range(0, n, WINDOW))
    return Window(c.group, c.index, start, end, n, metric, tuple(cells), pages)


SHADES = 5  # levels of the strip's shading, per sign: one SVG path per level keeps a 16 x 64 strip small


@dataclass(frozen=True)
class StripRow:
    completion: int
    length: int
    advantage: float
    bins: int
    paths: tuple[tuple[str, int, str], ...]  # (up | down, level 1…SHADES, SVG path of its cells)
    windows: tuple[tuple[int, int, str], ...]  # (first bin, bins, url) of each window
    current: bool


@dataclass(frozen=True)
class Strip:
    metric: Metric
    rows: tuple[StripRow, ...]
    width: int  # bins of the longest completion


def build_strip(result: Recomputed, rows: list[int], metric_id: str, entropy: list[np.ndarray | None],
                other: Recomputed | None, current: int, url: Callable[[int, int], str]) -> Strip:
    """Every completion of the group as 64-token bins shaded by the mean of the metric (for ratio:
    the share of clipped tokens), on one scale for the group."""
    metric = METRICS[metric_id]
    series = []
    for k, row in enumerate(rows):
        c = result.completions[row]
        v = values(metric_id, c, entropy[k], other.completions[row] if other else None)
        if v is None:
            v = np.zeros(len(c.logp))
        if metric_id == "ratio":
            v = (c.clip_low | c.clip_high).astype(float) * np.sign(c.advantage or 1.0)
        elif metric.log_scale:
            v = np.log(np.maximum(v, 1e-300)) - math.log(metric.centre)
        else:
            v = v - metric.centre
        pad = (-len(v)) % BIN
        means = np.concatenate([v, np.full(pad, np.nan)]).reshape(-1, BIN)
        series.append((c, np.nanmean(means, axis=1)))
    top = max((float(np.nanmax(np.abs(m))) for _, m in series if m.size), default=0.0)
    out = []
    for k, (c, means) in enumerate(series):
        cells: dict[tuple[str, int], list[int]] = {}
        for i, m in enumerate(means):
            level = 0 if top == 0 or not np.isfinite(m) else int(math.ceil(abs(m) / top * SHADES - 1e-9))
            if level > 0:
                cells.setdefault(("up" if m > 0 else "down", min(level, SHADES)), []).append(i)
        paths = tuple((sign, level, "".join(f"M{i} 0h1v1h-1z" for i in xs))
                      for (sign, level), xs in sorted(cells.items()))
        per_window = WINDOW // BIN
        windows = tuple((s // BIN, min(per_window, len(means) - s // BIN), url(rows[k], s))
                        for s in range(0, len(c.logp), WINDOW))
        out.append(StripRow(c.index, len(c.logp), c.advantage, len(means), paths, windows, rows[k] == current))
    width = max((r.bins for r in out), default=1)
    return Strip(metric, tuple(out), width)
