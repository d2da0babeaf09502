"""What every chart shares: rounding, ticks, text placement and the plot frame.

Chart geometry is pure Python (no web framework, no torch): each chart is a
frozen dataclass whose numbers are already SVG user units rounded to 2
decimals and whose texts are already formatted, so templates only place
elements (the page's Content-Security-Policy forbids inline styles and scripts
anyway). Colour is never the only carrier of meaning: hatching, marker shapes,
dashes and direct text labels say the same thing.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.numbers import MINUS

ZERO_ADVANTAGE = 1e-12  # |A| below this counts as 0 (an equal-reward group gives exactly 0)
CHAR_W = 6.2  # rough width of one character of 11px chart text, for label placement


def r2(v: float) -> float:
    """SVG user units: 2 decimals, and −0.0 becomes 0.0."""
    return round(v, 2) + 0.0


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About `n` ticks at a 1/2/2.5/5 × 10^k step, all inside [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("nice_ticks needs finite bounds")
    lo, hi = min(lo, hi), max(lo, hi)
    if hi == lo:
        return [float(lo)]
    mag = 10.0 ** math.floor(math.log10((hi - lo) / max(n, 1)))

    def span(step: float) -> tuple[int, int]:
        return math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)

    # the step whose tick count is closest to n; on a tie, the coarser step
    steps = [m * mag * f for f in (0.1, 1, 10) for m in (1, 2, 2.5, 5)]
    step = min(steps, key=lambda st: (abs(span(st)[1] - span(st)[0] + 1 - n), -st))
    first, last = span(step)
    return [float(f"{k * step:.15g}") + 0.0 for k in range(first, last + 1)]


def tick_label(v: float, ticks: Sequence[float]) -> str:
    """Fixed decimals just enough for the tick step (0.25 → 2, 0.5 → 1, 2 → 0)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(v) or 1.0
    d = next((d for d in range(0, 10) if abs(round(step, d) - step) <= 1e-9 * step), 10)
    s = f"{v:.{d}f}"
    return ("0" if float(s) == 0 else s).replace("-", MINUS)



@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    anchor: str = "start"  # SVG text-anchor: start | middle | end


@dataclass(frozen=True)
class Tick:
    value: float
    pos: float  # x for an x tick, y for a y tick
    label: str



@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Hit:
    """A focusable, hoverable region over a chart's marks (static/js/linked.js links it to the
    group table): `samples` name the rows it stands for, or `choice` the action they chose."""
    x: float
    y: float
    width: float
    height: float
    label: str  # accessible name and tooltip
    samples: tuple[int, ...] = ()
    choice: int | None = None


@dataclass(frozen=True)
class PlotFrame:
    """A chart's size and its plotting rectangle; axes, grid and data lie inside it."""
    width: float
    height: float
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    plot_width: float
    plot_height: float


def frame_fields(width: float, height: float, left: float, right: float, top: float, bottom: float) -> dict:
    """PlotFrame's fields, rounded, for a chart dataclass that extends it."""
    return {"width": r2(width), "height": r2(height), "plot_left": r2(left), "plot_right": r2(right),
            "plot_top": r2(top), "plot_bottom": r2(bottom), "plot_width": r2(right - left),
            "plot_height": r2(bottom - top)}


def wrap(text: str, max_chars: int, max_lines: int = 3) -> list[str]:
    """Greedy word wrap; long words break after a hyphen; an overflow ends in …."""
    if max_chars < 1:  # no room for a character: every cut would be empty and never end
        raise ValueError(f"wrap needs room for at least one character, not {max_chars}")
    words = []
    for w in str(text).split():
        while len(w) > max_chars:
            cut = w.rfind("-", 0, max_chars) + 1 or max_chars
            words.append(w[:cut])
            w = w[cut:]
        words.append(w)
    lines: list[str] = []
    for w in words:
        if lines and len(lines[-1]) + 1 + len(w) <= max_chars and not lines[-1].endswith("-"):
            lines[-1] += " " + w
        elif lines and lines[-1].endswith("-") and len(lines[-1]) + len(w) <= max_chars:
            lines[-1] += w
        else:
            lines.append(w)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max_chars - 1].rstrip() + "…"
    return lines or [""]

