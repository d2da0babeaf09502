"""Small line charts of training curves: one metric each, labelled series ends, optional vertical
marks (a path's stage starts). Up to five series stay apart without colour: each has its own dash
pattern and end marker (STYLES), and its label at its end."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.charts.frame import CHAR_W, PlotFrame, Text, Tick, frame_fields, nice_ticks, r2, tick_label
from app.views.numbers import significant

# (dash pattern, end marker, the words for both): series k takes STYLES[k] unless the caller picks.
STYLES = (("", "circle", "solid ●"), ("6 4", "square", "dashed ■"), ("2 3", "triangle", "dotted ▲"),
          ("9 3 2 3", "diamond", "dash-dot ◆"), ("", "ring", "thin ○"))


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    dashed: bool
    marker: str  # circle | square | triangle | diamond | ring, at the last point
    points: tuple[tuple[float, float], ...]  # data space (iteration, value)
    svg_points: str
    end_x: float
    end_y: float
    end_d: str  # path of the marker ("" for a circle or a ring)
    label_text: Text
    style: int = 0  # index into STYLES: the CSS class series-<style>
    dash: str = ""  # SVG stroke-dasharray ("" solid)


@dataclass(frozen=True)
class Mark:
    """A vertical line at x (a stage's start), with a short label at the plot's top."""
    x: float
    label: Text


@dataclass(frozen=True)
class LineChart(PlotFrame):
    key: str
    title: str
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_tick_label_y: float
    y_tick_label_x: float
    zero_y: float | None  # the 0 line, when 0 lies strictly inside the y range
    series: tuple[Series, ...]
    x_label: Text
    y_label: Text  # drawn rotated by −90° about (x, y)
    summary: str
    caption: str
    marks: tuple[Mark, ...] = ()


def _y_range(values: Sequence[float], fixed: tuple[float, float] | None) -> tuple[float, float]:
    lo, hi = min([*values, 0.0]), max([*values, 0.0])
    if fixed is not None and fixed[0] <= lo and hi <= fixed[1]:
        return fixed
    if hi - lo < 1e-12:
        hi = lo + 1.0
    pad = 0.08 * (hi - lo)
    return (lo - pad if lo < 0 else lo), hi + pad


def _marker_d(shape: str, x: float, y: float) -> str:
    if shape == "square":
        return f"M{r2(x - 3.5)} {r2(y - 3.5)}h7v7h-7Z"
    if shape == "triangle":
        return f"M{r2(x)} {r2(y - 4.5)}L{r2(x + 4.5)} {r2(y + 3.5)}H{r2(x - 4.5)}Z"
    if shape == "diamond":
        return f"M{r2(x)} {r2(y - 4.5)}L{r2(x + 4.5)} {r2(y)}L{r2(x)} {r2(y + 4.5)}L{r2(x - 4.5)} {r2(y)}Z"
    return ""


def _spread(wanted: list[float], lo: float, hi: float, gap: float = 14.0) -> list[float]:
    """Label baselines as near as may be to `wanted`, at least `gap` apart, inside [lo, hi]."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    ys = [min(max(wanted[i], lo), hi) for i in order]
    for j in range(1, len(ys)):  # push down what is too close to the one above it
        ys[j] = max(ys[j], ys[j - 1] + gap)
    if ys and ys[-1] > hi:  # then up from the bottom, if that ran past it
        ys[-1] = hi
        for j in range(len(ys) - 2, -1, -1):
            ys[j] = min(ys[j], ys[j + 1] - gap)
    out = [0.0] * len(wanted)
    for j, i in enumerate(order):
        out[i] = ys[j]
    return out


def line_chart(key: str, title: str, y_label: str, series_spec: Sequence[tuple[str, str, list]],
               fixed: tuple[float, float] | None = None, width: float = 300, height: float = 176, *,
               x_label: str = "iteration", caption: str | None = None, styles: Sequence[int] | None = None,
               marks: Sequence[tuple[float, str]] = (), gutter: bool = False, legend: bool = True) -> LineChart:
    """series_spec: (key, label, [(iteration, value or None), …]); series k is drawn in STYLES[k] (the
    first solid, the next dashed, …) or in STYLES[styles[k]]. `caption` replaces the x axis's sentence;
    `marks`: (x, label) vertical lines, e.g. where each stage of a path starts. `gutter`: the labels go
    right of the plot, each at its line's end height (several lines ending close together cover labels
    set inside); `legend`: the caption also names each line style."""
    specs = [(k, lab, [(float(i), float(v)) for i, v in pts if v is not None and math.isfinite(v)])
             for k, lab, pts in series_spec]
    picked = list(styles) if styles is not None else list(range(len(specs)))
    kept = [(s, picked[n]) for n, s in enumerate(specs) if s[2]]
    specs, picked = [s for s, _ in kept], [k for _, k in kept]
    if not specs:
        raise ValueError(f"line_chart {key!r} has no finite points")
    xs = [p[0] for s in specs for p in s[2]]
    x_lo, x_hi = min(min(xs), 0.0), max(max(xs), 1.0)
    y_lo, y_hi = _y_range([p[1] for s in specs for p in s[2]], fixed)
    longest = max(len(lab) for _k, lab, _p in specs)
    pl, pr, pt, pb = 48.0, width - 8 - (longest * CHAR_W + 10 if gutter else 0), 12.0, height - 46

    def sx(v: float) -> float:
        return r2(pl + (v - x_lo) / (x_hi - x_lo) * (pr - pl))

    def sy(v: float) -> float:
        return r2(pb - (v - y_lo) / (y_hi - y_lo) * (pb - pt))

    finals = [s[2][-1][1] for s in specs]
    beside = _spread([sy(v) + 4 for v in finals], pt + 4, pb + 10) if gutter else []
    series: list[Series] = []
    used_y: list[float] = []
    for n, (k, lab, pts) in enumerate(specs):
        window = pr - len(lab) * CHAR_W - 4
        near = [v for i, v in pts if sx(i) >= window] + [pts[-1][1]]
        above = finals[n] >= max(finals)
        ya, yb = sy(max(near)) - 5, sy(min(near)) + 13
        y = ya if above else yb
        if above and ya < pt + 10:
            y = yb
        elif not above and yb > pb - 3:
            y = ya
        for u in used_y:  # keep two labels apart
            if abs(y - u) < 12:
                y = u + 12 if u + 12 <= pb - 3 else u - 12
        used_y.append(y)
        label = Text(r2(pr + 7), r2(beside[n]), lab, "start") if gutter else Text(r2(pr - 3), r2(y), lab, "end")
        ex, ey = sx(pts[-1][0]), sy(pts[-1][1])
        style = picked[n] % len(STYLES)
        dash, shape, _words = STYLES[style]
        series.append(Series(
            key=k, label=lab, dashed=bool(dash), marker=shape, points=tuple(pts),
            svg_points=" ".join(f"{sx(i)},{sy(v)}" for i, v in pts), end_x=ex, end_y=ey,
            end_d=_marker_d(shape, ex, ey), label_text=label, style=style, dash=dash,
        ))
    xt, yt = nice_ticks(x_lo, x_hi, 5), nice_ticks(y_lo, y_hi, 4)
    listing = "; ".join(f"{s.label} {significant(s.points[0][1])} at {x_label} {int(s.points[0][0])} → "
                        f"{significant(s.points[-1][1])} at {x_label} {int(s.points[-1][0])}" for s in series)
    if caption is None:
        caption = "x: training iteration (0 = the stage's start checkpoint)."
    if legend and len(series) == 2 and [s.style for s in series] == [0, 1]:  # the two-series wording, kept
        caption += f" Solid line with ● end: {series[0].label}; dashed with ■ end: {series[1].label}."
    elif legend and len(series) > 1:
        caption += " " + "; ".join(f"{STYLES[s.style][2]}: {s.label}" for s in series) + "."
    drawn = tuple(Mark(sx(x), Text(r2(sx(x) + 3), r2(pt + 10), lab, "start"))
                  for x, lab in marks if x_lo < x <= x_hi)
    return LineChart(
        **frame_fields(width, height, pl, pr, pt, pb), key=key, title=title,
        x_range=(x_lo, x_hi), y_range=(y_lo, y_hi),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(pb + 14), y_tick_label_x=r2(pl - 5),
        zero_y=sy(0.0) if y_lo < 0 < y_hi else None, series=tuple(series),
        x_label=Text(r2((pl + pr) / 2), r2(pb + 32), x_label, "middle"),
        y_label=Text(12.0, r2((pt + pb) / 2), y_label, "middle"),
        summary=f"{title}: {listing}.", caption=caption, marks=drawn,
    )
