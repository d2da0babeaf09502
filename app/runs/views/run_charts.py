"""One logged metric over a run's steps as a small SVG chart (issue 34's explorer).

The points come cut by M4 (domain/run_series.py: every bucket's first, last, lowest and highest point),
so a 10,000-step run draws at most 4 × BUCKETS points and its spikes are the data's. With few points in
view (DOT_LIMIT: a short run, or a zoomed window) each point is a dot that links to its step; above
that, the line alone, and the page's zoom brings the dots back. Non-finite values (a NaN loss) cannot be
drawn on a y axis: each is a ✕ on the plot's top edge at its step, and the caption names its steps.
Vertical marks: the selected step, and the steps the findings point at (each a link).

The y axis stays inside the metric's domain (views/run_domains.py: a share in [0, 1], a norm never below 0).
With `?smooth=w` the smoothed series (domain/run_smoothing.py, TensorBoard's debiased EMA, computed over the
whole run) is drawn over the raw line, which goes faint. Every drawn point's step, y and value label ride on
the SVG as data attributes for the readout (static/run-readout.js: the step under the pointer on every chart).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.runs.domain.run_series import Point, downsample
from app.runs.views.run_domains import FREE, Domain
from app.views.charts.frame import PlotFrame, Tick, frame_fields, nice_ticks, r2, tick_label
from app.views.numbers import significant

BUCKETS = 150
DOT_LIMIT = 120
WIDTH, HEIGHT = 400.0, 136.0
# LEFT is the least left margin (it grows with the y labels); RIGHT leaves the last x label room
LEFT, RIGHT, TOP, BOTTOM = 50.0, 386.0, 10.0, 118.0
CHAR_WIDTH = 7.2  # a tick label's digit at 12 px, with a margin: labels like 0.00835 must not be cut at the edge


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    step: int
    label: str  # "step 12: 0.431", its accessible name and tooltip
    url: str
    selected: bool


@dataclass(frozen=True)
class StepMark:
    x: float
    step: int
    kind: str  # "selected" | "finding" | "recorded" (a step with its step record: a notch on the x axis)
    label: str
    url: str


@dataclass(frozen=True)
class RunChart(PlotFrame):
    key: str  # the metric's name as logged
    slug: str  # for ids: the name with every non-alphanumeric run as "-"
    sentence: str
    points_svg: str  # the polyline's points ("" when no finite value is in view)
    dots: tuple[Dot, ...]
    not_finite: tuple[Dot, ...]  # ✕ marks on the top edge
    marks: tuple[StepMark, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_tick_label_y: float
    y_tick_label_x: float
    zero_y: float | None
    summary: str  # the chart said in words (aria-label)
    caption: str
    logged: int  # points in view before downsampling
    drawn: int
    x_lo: int = 0  # the steps at plot_left and plot_right (the readout maps the pointer to a step with them)
    x_hi: int = 1
    read_steps: str = ""  # every drawn point, in step order, space-separated: its step,
    read_ys: str = ""  # its y in the viewBox (the top edge for a non-finite value),
    read_values: str = ""  # and its value as the step's table says it (cell())
    smooth_svg: str = ""  # the smoothed line's points ("" unless smoothing)
    smooth_ys: str = ""  # the smoothed value at each drawn point, as y and as label
    smooth_values: str = ""
    readout: tuple[int, str, str] | None = None  # without script: (step, value, smoothed) at the selected or last step


def slug(name: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in name.lower())
    return "-".join(p for p in out.split("-") if p) or "metric"


def cell(value: float | None) -> str:
    """A logged value as the page writes it: a count as one (12,000), the rest to 5 significant digits."""
    if value is None:
        return "—"
    if math.isfinite(value) and value == int(value) and abs(value) < 1e12:
        return f"{int(value):,}"
    return significant(value, 5)


def y_range(values: Sequence[float], domain: Domain = FREE) -> tuple[float, float]:
    """The values' range, padded, the padding never past the domain's bounds (a value past one still shows)."""
    lo, hi = min(values), max(values)
    d_lo, d_hi = domain
    flat = hi - lo < 1e-12 * max(1.0, abs(hi))
    if flat and d_lo is not None and d_hi is not None and d_lo <= lo and hi <= d_hi:
        return d_lo, d_hi  # a constant share: the whole [0, 1], the line on its value
    pad = max(abs(hi) * 0.1, 0.5) if flat else 0.08 * (hi - lo)
    y_lo, y_hi = lo - pad, hi + pad
    if d_lo is not None:
        y_lo = max(y_lo, min(d_lo, lo))
    if d_hi is not None:
        y_hi = min(y_hi, max(d_hi, hi))
    return y_lo, y_hi


def run_chart(name: str, sentence: str, points: Sequence[Point], x_range: tuple[int, int],
              step_url: Callable[[int], str], selected: int | None = None,
              finding_steps: Sequence[tuple[int, str]] = (), recorded: Sequence[int] = (),
              domain: Domain = FREE, smoothed: Mapping[int, float] | None = None) -> RunChart:
    """`points`: the metric's (step, value) inside `x_range`, every one; cut here for drawing. `smoothed`:
    step -> the smoothed value, when the page smooths."""
    drawn = downsample(points, BUCKETS)
    finite = [(s, v) for s, v in drawn if math.isfinite(v)]
    x_lo, x_hi = x_range
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = y_range([v for _, v in finite], domain) if finite else (0.0, 1.0)

    yt = nice_ticks(y_lo, y_hi, 4)
    left = max(LEFT, max(len(tick_label(v, yt)) for v in yt) * CHAR_WIDTH + 10)

    def sx(step: float) -> float:
        return r2(left + (step - x_lo) / (x_hi - x_lo) * (RIGHT - left))

    def sy(v: float) -> float:
        return r2(BOTTOM - (v - y_lo) / (y_hi - y_lo) * (BOTTOM - TOP))

    with_dots = len(drawn) <= DOT_LIMIT
    dots = tuple(Dot(sx(s), sy(v), s, f"step {s}: {significant(v, 4)}", step_url(s), s == selected)
                 for s, v in finite) if with_dots else ()
    bad = tuple(Dot(sx(s), TOP, s, f"step {s}: {significant(v)}", step_url(s), s == selected)
                for s, v in drawn if not math.isfinite(v))
    marks = [StepMark(sx(s), s, "finding", f"{rule} at step {s}", step_url(s))
             for s, rule in finding_steps if x_lo <= s <= x_hi and s != selected]
    marks += [StepMark(sx(s), s, "recorded", f"step {s}: recorded (its record opens from the step's table)",
                       step_url(s)) for s in recorded if x_lo <= s <= x_hi]
    if selected is not None and x_lo <= selected <= x_hi:
        marks.append(StepMark(sx(selected), selected, "selected", f"step {selected}, selected", step_url(selected)))
    xt = nice_ticks(x_lo, x_hi, 5)
    xt = [t for t in xt if float(t).is_integer()] or [float(x_lo), float(x_hi)]
    if finite:
        lo = min(finite, key=lambda p: p[1])
        hi = max(finite, key=lambda p: p[1])
        summary = (f"{name} over steps {points[0][0]} to {points[-1][0]}: first {significant(finite[0][1])}, last "
                   f"{significant(finite[-1][1])}, lowest {significant(lo[1])} at step {lo[0]}, highest "
                   f"{significant(hi[1])} at step {hi[0]}")
    else:
        summary = f"{name}: no finite value in steps {x_lo} to {x_hi}"
    cut = (f"{len(drawn)} of its {len(points)} logged points drawn (each run of steps keeps its first, last, "
           "lowest and highest: every extreme is here); zoom in for all of them."
           if len(drawn) < len(points) else f"All {len(points)} logged points.")
    if bad:
        cut += (f" ✕ on the top edge: not a number at step{'s' if len(bad) > 1 else ''} "
                f"{', '.join(str(d.step) for d in bad[:8])}{'…' if len(bad) > 8 else ''}.")
    def y_at(v: float) -> float:
        return sy(v) if math.isfinite(v) else TOP

    # the EMA of a series that fell to 0 tends to 0 and never reaches it (6e-22): below a millionth of the
    # series' own scale, its label says 0, as the raw value does
    scale = max((abs(v) for _, v in finite), default=0.0) * 1e-6
    smooth = [(s, smoothed[s]) for s, _ in drawn] if smoothed is not None else []
    smooth_labels = [cell(0.0 if abs(v) < scale else v) for _, v in smooth]
    at = next((i for i, (s, _) in enumerate(drawn) if s == selected), len(drawn) - 1)
    readout = (drawn[at][0], cell(drawn[at][1]), smooth_labels[at] if smooth else "") if drawn else None
    return RunChart(
        **frame_fields(WIDTH, HEIGHT, left, RIGHT, TOP, BOTTOM), key=name, slug=slug(name), sentence=sentence,
        points_svg=" ".join(f"{sx(s)},{sy(v)}" for s, v in finite), dots=dots, not_finite=bad,
        marks=tuple(marks),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(BOTTOM + 14), y_tick_label_x=r2(left - 5),
        zero_y=sy(0.0) if y_lo < 0 < y_hi else None, summary=summary, caption=cut,
        logged=len(points), drawn=len(drawn), x_lo=x_lo, x_hi=x_hi,
        read_steps=" ".join(str(s) for s, _ in drawn), read_ys=" ".join(str(y_at(v)) for _, v in drawn),
        read_values=" ".join(cell(v).replace(" ", "") for _, v in drawn),
        smooth_svg=" ".join(f"{sx(s)},{sy(v)}" for s, v in smooth if math.isfinite(v)),
        smooth_ys=" ".join(str(y_at(v)) for _, v in smooth), smooth_values=" ".join(smooth_labels),
        readout=readout)


__all__ = ["BUCKETS", "DOT_LIMIT", "RunChart", "cell", "run_chart", "slug", "y_range"]
