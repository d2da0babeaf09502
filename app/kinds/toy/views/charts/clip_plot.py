"""The clipped surrogate against the ratio, with the group's samples on it (docs/design.md §3).

    L(ρ) = min(ρA, clip(ρ, 1−ε, 1+ε_high)A), so L/|A| = min(ρ, clip(ρ)) for A > 0
    and −max(ρ, clip(ρ)) for A < 0: piecewise linear with breaks at 1−ε and 1+ε_high
    (ε_high = ε unless the conventions raise the band's top, as DAPO's clip-higher does).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.charts.frame import (
    CHAR_W,
    ZERO_ADVANTAGE,
    Hit,
    PlotFrame,
    Text,
    Tick,
    frame_fields,
    nice_ticks,
    r2,
    tick_label,
)
from app.views.numbers import MINUS, significant


def surrogate_over_abs_a(rho: float, epsilon: float, sign: int, epsilon_high: float | None = None) -> float:
    """L(ρ)/|A| for an advantage of the given sign (0 for A = 0)."""
    clipped = min(max(rho, 1 - epsilon), 1 + (epsilon if epsilon_high is None else epsilon_high))
    if sign > 0:
        return min(rho, clipped)
    if sign < 0:
        return -max(rho, clipped)
    return 0.0


def _marker_path(shape: str, cx: float, cy: float, h: float) -> str:
    x0, x1, y0, y1 = r2(cx - h), r2(cx + h), r2(cy - h), r2(cy + h)
    if shape == "square":
        return f"M{x0} {y0}H{x1}V{y1}H{x0}Z"
    if shape == "cross":
        return f"M{x0} {y0}L{x1} {y1}M{x0} {y1}L{x1} {y0}"
    return ""


@dataclass(frozen=True)
class Curve:
    sign: int  # +1: A = +1, −1: A = −1
    points: tuple[tuple[float, float], ...]  # data space (ρ, L/|A|), exact breakpoints
    svg_points: str  # "x,y x,y …" for <polyline points>
    dashed: bool
    label: Text


@dataclass(frozen=True)
class Marker:
    indices: tuple[int, ...]  # the samples drawn here (more than one only when grouped)
    shape: str  # circle (A > 0) | square (A < 0) | cross (A = 0)
    hollow: bool  # clip active: the gradient through ρ is saturated
    ratio: float
    value: float  # L/|A|
    cx: float
    cy: float
    size: float  # circle radius; half the side of the square / cross
    d: str  # SVG path for square and cross ("" for a circle)
    title: str
    ring: float  # radius of the ring drawn round it when its sample is highlighted


@dataclass(frozen=True)
class LegendItem:
    shape: str
    hollow: bool
    cx: float
    cy: float
    size: float
    d: str
    label: Text


@dataclass(frozen=True)
class ClipPlot(PlotFrame):
    epsilon: float
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    x_ticks: tuple[Tick, ...]  # drawn as grid lines, labels at y = x_tick_label_y
    y_ticks: tuple[Tick, ...]  # labels end at x = y_tick_label_x
    x_tick_label_y: float
    y_tick_label_x: float
    zero_y: float
    band_x: float
    band_width: float
    band_labels: tuple[Text, Text]  # "1−ε = 0.8" and "1+ε = 1.2" at the band's edges
    curves: tuple[Curve, ...]  # A > 0, then A < 0
    markers: tuple[Marker, ...]
    hits: tuple[Hit, ...]  # one per drawn point, naming every sample there
    count_labels: tuple[Text, ...]  # "×3" next to a point shared by several samples
    legend: tuple[LegendItem, ...]
    x_label: Text
    y_label: Text  # drawn rotated by −90° about (x, y)
    clip_active_count: int
    summary: str
    caption: str


def clip_plot(
    epsilon: float,
    samples: Sequence[dict],
    labels: Sequence[str] | None = None,
    width: float = 420,
    height: float = 280,
    max_markers: int = 200,
    epsilon_high: float | None = None,
) -> ClipPlot:
    eps = float(epsilon)
    if not 0 < eps < 1:
        raise ValueError(f"epsilon must lie in (0, 1), got {eps}")
    high = eps if epsilon_high is None else float(epsilon_high)
    if not 0 < high:
        raise ValueError(f"epsilon_high must be > 0, got {high}")
    if labels is not None and len(labels) != len(samples):
        raise ValueError(f"{len(labels)} labels for {len(samples)} samples")
    pts = []
    for i, s in enumerate(samples):
        rho, a = float(s["ratio"]), float(s["advantage"])
        if math.isfinite(rho) and math.isfinite(a):
            sign = 0 if abs(a) <= ZERO_ADVANTAGE else (1 if a > 0 else -1)
            value = float(s["clipped"]) / abs(a) if sign else 0.0
            # saturated: the band's clip, or verl's dual clip floor c·A (A < 0, ρ > c)
            flat = bool(s["clip_active"]) or bool(s.get("dual_clip_hit"))
            pts.append((i, rho, sign, value, flat and sign != 0, s))
    ratios = [p[1] for p in pts]
    x_lo = max(0.0, min(min(ratios, default=1.0), 1 - 2 * eps) - 0.1)
    x_hi = max(max(ratios, default=1.0), 1 + 2 * high) + 0.1
    xs = [x_lo] + [b for b in (1 - eps, 1 + high) if x_lo < b < x_hi] + [x_hi]
    ys = [surrogate_over_abs_a(x, eps, s, high) for x in xs for s in (1, -1)] + [0.0] + [p[3] for p in pts]
    pad = 0.08 * (max(ys) - min(ys))
    y_lo, y_hi = min(ys) - pad, max(ys) + pad

    # The legend flows left to right from the chart's left edge and wraps where the next item would
    # pass the right edge (a phone-width chart takes three rows): its rows below the two it always
    # had make the chart taller.
    items = (("circle", False, "A > 0 sample"), ("square", False, "A < 0 sample"), ("cross", False, "A = 0 sample"),
             ("circle", True, "hollow = clip active: ∂L/∂ρ = 0"))
    placed, lx, row = [], 14.0, 0
    for k, (shape, hollow, text) in enumerate(items):
        item_w = 10 + len(text) * CHAR_W
        if k and (hollow or lx + item_w > width - 4):  # the hollow marker's line starts a row of its own
            lx, row = 14.0, row + 1
        placed.append((shape, hollow, lx, row, text))
        lx += item_w + 16
    height += 18.0 * max(0, row - 1)

    left, right, top = 52.0, 12.0, 24.0
    plot_l, plot_r, plot_t, plot_b = left, width - right, top, height - 80.0 - 18.0 * max(0, row - 1)

    def sx(v: float) -> float:
        return r2(plot_l + (v - x_lo) / (x_hi - x_lo) * (plot_r - plot_l))

    def sy(v: float) -> float:
        return r2(plot_b - (v - y_lo) / (y_hi - y_lo) * (plot_b - plot_t))

    xt, yt = nice_ticks(x_lo, x_hi), nice_ticks(y_lo, y_hi)
    curves = []
    for sign in (1, -1):
        data = tuple((x, surrogate_over_abs_a(x, eps, sign, high)) for x in xs)
        # right-aligned at the right end, just above the highest point of the curve under the text
        text = "A > 0 (A = +1)" if sign > 0 else f"A < 0 (A = {MINUS}1)"
        x0 = x_hi - (len(text) * 6.6 + 4) / (plot_r - plot_l) * (x_hi - x_lo)
        top_value = max(surrogate_over_abs_a(x, eps, sign, high) for x in [x0, x_hi, *xs] if x >= x0)
        label = Text(r2(plot_r - 4), r2(max(sy(top_value) - 6, plot_t + 10)), text, "end")
        curves.append(Curve(sign, data, " ".join(f"{sx(x)},{sy(y)}" for x, y in data), sign < 0, label))

    band_l, band_r = sx(1 - eps), sx(1 + high)
    top_name = "ε" if high == eps else "ε_high"
    lo_text = f"1{MINUS}ε = {significant(1 - eps, 4, True)}"
    hi_text = f"1+{top_name} = {significant(1 + high, 4, True)}"
    lo_w, hi_w = len(lo_text) * CHAR_W, len(hi_text) * CHAR_W
    lo_label = Text(r2(band_l - 2), r2(plot_t - 6), lo_text, "end") if band_l - lo_w >= 2 \
        else Text(r2(band_l + 2), r2(plot_t - 6), lo_text, "start")
    hi_inside = band_r + hi_w > width - 2
    hi_row = plot_t - 18 if hi_inside and lo_label.anchor == "start" else plot_t - 6
    hi_label = Text(r2(band_r - 2), r2(hi_row), hi_text, "end") if hi_inside \
        else Text(r2(band_r + 2), r2(hi_row), hi_text, "start")

    shapes = {1: "circle", -1: "square", 0: "cross"}
    groups: dict[tuple, list] = {}
    for p in pts:
        i, rho, sign, value, hollow, _s = p
        groups.setdefault((shapes[sign], hollow, sx(rho), sy(value)), []).append(p)

    def details(i: int, s: dict, hollow: bool) -> str:
        choice = f"choice {labels[i]}" if labels is not None else f"action {s.get('action', '?')}"
        return (f"{choice}, reward {significant(float(s.get('reward', 0)), strip=True)}, "
                f"A = {significant(float(s['advantage']))}, ρ = {significant(float(s['ratio']))}, "
                f"L = {significant(float(s['clipped']))}" + (", clip active: ∂L/∂ρ = 0" if hollow else ""))

    markers, hits, count_labels = [], [], []
    for (shape, hollow, cx, cy), members in groups.items():
        per_sample = len(pts) <= max_markers
        for chunk in ([[m] for m in members] if per_sample else [members]):
            i, rho, sign, value, _h, s = chunk[0]
            who = f"sample {i}" if len(chunk) == 1 else f"{len(chunk)} samples"
            markers.append(Marker(
                indices=tuple(m[0] for m in chunk), shape=shape, hollow=hollow, ratio=rho, value=value,
                cx=cx, cy=cy, size=5.0 if shape == "circle" else 4.5,
                d=_marker_path(shape, cx, cy, 4.5), title=f"{who}: {details(i, s, hollow)}", ring=9.0,
            ))
        # One hit per drawn point: samples on one point share it (they look like one marker).
        said = {details(m[0], m[5], hollow) for m in members}
        names = ", ".join(str(m[0]) for m in members[:12]) + (", …" if len(members) > 12 else "")
        where = f"sample {names}" if len(members) == 1 else f"samples {names}"
        what = said.pop() if len(said) == 1 else (f"ρ = {significant(members[0][1])}, L/|A| = "
                                                   f"{significant(members[0][3])}")
        hits.append(Hit(r2(cx - 8), r2(cy - 8), 16.0, 16.0, f"{where}: {what}",
                        samples=tuple(m[0] for m in members)))
        if len(members) > 1:
            count = f"×{len(members)}"
            # above right of the marker, or below it where a curve's label is there already
            clash = any(c.label.x - len(c.label.text) * 6.6 < cx + 8 + len(count) * CHAR_W and cx + 8 < c.label.x
                        and abs(c.label.y - (cy - 6)) < 13 for c in curves)
            count_labels.append(Text(r2(cx + 8), r2(cy + 16 if clash else cy - 6), count))

    ly = plot_b + 52
    legend = tuple(
        LegendItem(shape, hollow, r2(x), r2(ly + 18 * k), 5.0 if shape == "circle" else 4.5,
                   _marker_path(shape, r2(x), r2(ly + 18 * k), 4.5), Text(r2(x + 10), r2(ly + 18 * k + 4), text))
        for shape, hollow, x, k, text in placed
    )
    n_active = sum(1 for p in pts if p[4])
    skipped = len(samples) - len(pts)
    summary = (
        f"Clipped surrogate L/|A| against the ratio ρ for ε = {significant(eps, 4, True)}"
        + (f", ε_high = {significant(high, 4, True)}" if high != eps else "") + ": flat (no gradient) "
        f"above {significant(1 + high, 4, True)} for A > 0 and below {significant(1 - eps, 4, True)} for A < 0. "
        + (f"{len(pts)} samples, ratios {significant(min(ratios))} to {significant(max(ratios))}, "
           f"{n_active} clip active." if pts else "No samples.")
        + (f" Not drawn: {skipped} with a non-finite ratio or advantage." if skipped else "")
    )
    caption = (
        f"L(ρ) = min(ρA, clip(ρ, 1{MINUS}ε, 1+{top_name})A) divided by |A|; solid line A > 0, dashed line A < 0. "
        f"Hatched band: the clip range [{significant(1 - eps, 4, True)}, {significant(1 + high, 4, True)}]. "
        "Hollow markers: clip active (the band, or a dual clip), so ∂L/∂ρ = 0."
    )
    return ClipPlot(
        **frame_fields(width, height, plot_l, plot_r, plot_t, plot_b),
        epsilon=eps, x_range=(x_lo, x_hi), y_range=(y_lo, y_hi),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=r2(plot_b + 16), y_tick_label_x=r2(plot_l - 6),
        zero_y=sy(0.0), band_x=band_l, band_width=r2(band_r - band_l), band_labels=(lo_label, hi_label),
        curves=tuple(curves), markers=tuple(markers), hits=tuple(hits), count_labels=tuple(count_labels), legend=legend,
        x_label=Text(r2((plot_l + plot_r) / 2), r2(plot_b + 32), "ratio ρ = π/π_old", "middle"),
        y_label=Text(14.0, r2((plot_t + plot_b) / 2), "surrogate L / |A|", "middle"),
        clip_active_count=n_active, summary=summary, caption=caption,
    )

