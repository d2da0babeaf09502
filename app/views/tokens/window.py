"""A token view at any scale: one window of one completion's tokens, each with a number under it,
below an overview strip of the whole group. For completions too long to draw whole (a G 16 x 4,096
step is 65,536 tokens): the page draws WINDOW tokens and the strip, 64-token bins per completion
shaded by the same number, links each stretch to its window. The short-completion view, every token
with its card and keyboard, is token_view.py; a kind picks the one its completions need.

Reads per-token arrays (TokenArrays: any kind's results that carry them) and the metric's values,
given by the kind; computes nothing but layout.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.views.numbers import ratio, readout
from app.views.tokens.metrics import Metric, visible

WINDOW = 256  # tokens of one completion on screen at a time
BIN = 64  # tokens per cell of the overview strip
SHADES = 5  # levels of the strip's shading, per sign: one SVG path per level keeps a 16 x 64 strip small


class TokenArrays(Protocol):
    """One completion's per-token numbers, as a kind's results carry them (no padding)."""
    @property
    def group(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def advantage(self) -> float: ...
    @property
    def logp(self) -> np.ndarray: ...
    @property
    def mask(self) -> np.ndarray: ...
    @property
    def ratio(self) -> np.ndarray: ...
    @property
    def kl(self) -> np.ndarray: ...
    @property
    def weight(self) -> np.ndarray: ...
    @property
    def grad(self) -> np.ndarray: ...
    @property
    def clip_low(self) -> np.ndarray: ...
    @property
    def clip_high(self) -> np.ndarray: ...


# The metric's number per token of the completion in row `row`, or None where the kind has none
Values = Callable[[str, int], np.ndarray | None]


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


def build_window(completions: Sequence[TokenArrays], row: int, tokens: list[str], start: int, metric: Metric,
                 values: Values, url: Callable[[int], str]) -> Window:
    """The WINDOW tokens of completion `row` from `start`, bars on the whole completion's scale."""
    c = completions[row]
    metric_id = metric.id
    per_token = values(metric_id, row)
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


def build_strip(completions: Sequence[TokenArrays], rows: list[int], metric: Metric, values: Values, current: int,
                url: Callable[[int, int], str]) -> Strip:
    """Every completion of the group (`rows`) as 64-token bins shaded by the mean of the metric (for
    ratio: the share of clipped tokens), on one scale for the group."""
    metric_id = metric.id
    series = []
    for row in rows:
        c = completions[row]
        v = values(metric_id, row)
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
