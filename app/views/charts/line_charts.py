"""Small line charts of a stage's training curves: one metric each, labelled series ends."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.charts.frame import CHAR_W, PlotFrame, Text, Tick, frame_fields, nice_ticks, r2, tick_label
from app.views.numbers import significant


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    dashed: bool
    marker: str  # circle (solid line) | square (dashed line), at the last point
    points: tuple[tuple[float, float], ...]  # data space (iteration, value)
    svg_points: str
    end_x: float
    end_y: float
    end_d: str  # path of the square marker ("" for a circle)
    label_text: Text


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


def _y_range(values: Sequence[float], fixed: tuple[float, float] | None) -> tuple[float, float]:
    lo, hi = min([*values, 0.0]), max([*values, 0.0])
    if fixed is not None and fixed[0] <= lo and hi <= fixed[1]:
        return fixed
    if hi - lo < 1e-12:
        hi = lo + 1.0
    pad = 0.08 * (hi - lo)
    return (lo - pad if lo < 0 else lo), hi + pad


def line_chart(key: str, title: str, y_label: str, series_spec: Sequence[tuple[str, str, list]],
               fixed: tuple[float, float] | None = None, width: float = 300, height: float = 176) -> LineChart:
    """series_spec: (key, label, [(iteration, value or None), …]); the first is solid, the next dashed."""
    specs = [(k, lab, [(float(i), float(v)) for i, v in pts if v is not None and math.isfinite(v)])
             for k, lab, pts in series_spec]
    specs = [s for s in specs if s[2]]
    if not specs:
        raise ValueError(f"line_chart {key!r} has no finite points")
    xs = [p[0] for s in specs for p in s[2]]
    x_lo, x_hi = min(min(xs), 0.0), max(max(xs), 1.0)
    y_lo, y_hi = _y_range([p[1] for s in specs for p in s[2]], fixed)
    pl, pr, pt, pb = 48.0, width - 8, 12.0, height - 46

    def sx(v: float) -> float:
        return r2(pl + (v - x_lo) / (x_hi - x_lo) * (pr - pl))

    def sy(v: float) -> float:
        return r2(pb - (v - y_lo) / (y_hi - y_lo) * (pb - pt))

    finals = [s[2][-1][1] for s in specs]
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
        ex, ey = sx(pts[-1][0]), sy(pts[-1][1])
        dashed = n > 0
        series.append(Series(
            key=k, label=lab, dashed=dashed, marker="square" if dashed else "circle", points=tuple(pts),
            svg_points=" ".join(f"{sx(i)},{sy(v)}" for i, v in pts), end_x=ex, end_y=ey,
            end_d=f"M{r2(ex - 3.5)} {r2(ey - 3.5)}h7v7h-7Z" if dashed else "",
            label_text=Text(r2(pr - 3), r2(y), lab, "end"),
        ))
    xt, yt = nice_ticks(x_lo, x_hi, 5), nice_ticks(y_lo, y_hi, 4)
    listing = "; ".join(f"{s.label} {significant(s.points[0][1])} at iteration {int(s.points[0][0])} → "
                        f"{significant(s.points[-1][1])} at iteration {int(s.points[-1][0])}" for s in series)
    caption = "x: training iteration (0 = the stage's start checkpoint)."
    if len(series) > 1:
        caption += f" Solid line with ● end: {series[0].label}; dashed with ■ end: " \
                   + ", ".join(s.label for s in series[1:]) + "."
    return LineChart(
        **frame_fields(width, height, pl, pr, pt, pb), key=key, title=title,
        x_range=(x_lo, x_hi), y_range=(y_lo, y_hi),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(pb + 14), y_tick_label_x=r2(pl - 5),
        zero_y=sy(0.0) if y_lo < 0 < y_hi else None, series=tuple(series),
        x_label=Text(r2((pl + pr) / 2), r2(pb + 32), "iteration", "middle"),
        y_label=Text(12.0, r2((pt + pb) / 2), y_label, "middle"),
        summary=f"{title}: {listing}.", caption=caption,
    )
