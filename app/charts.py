"""Chart geometry for the Inspector panel (templates/_charts.html draws it).

Pure Python: no web framework, no torch. Every function returns a frozen
dataclass whose numbers are already in SVG user units, rounded to 2 decimals,
and whose texts are already formatted, so the templates only place elements
(the page's Content-Security-Policy forbids inline styles and scripts anyway).
Colour is never the only carrier of meaning: hatching, marker shapes, dashes
and direct text labels say the same thing.

The clipped surrogate follows DESIGN.md §3:
    L(ρ) = min(ρA, clip(ρ, 1−ε, 1+ε)A), so L/|A| = min(ρ, clip(ρ)) for A > 0
    and −max(ρ, clip(ρ)) for A < 0: piecewise linear with breaks at 1∓ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

MINUS = "\u2212"
ZERO_ADVANTAGE = 1e-12  # |A| below this counts as 0 (an equal-reward group gives exactly 0)
CHAR_W = 6.2  # rough width of one character of 11px chart text, for label placement


def _r(v: float) -> float:
    return round(v, 2) + 0.0  # + 0.0 turns −0.0 into 0.0


def fmt(v: float, sig: int = 3, strip: bool = False) -> str:
    """`sig` significant digits, Unicode minus, no scientific notation in 1e−4 … 1e6."""
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else MINUS + "∞"
    if v == 0:
        return "0"
    e = math.floor(math.log10(abs(v)))
    if e < -4 or e >= 6:
        mantissa, exp = f"{v:.{sig - 1}e}".split("e")
        if strip and "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        s = f"{mantissa}e{int(exp)}"
    else:
        s = f"{v:.{max(0, sig - 1 - e)}f}"
        if strip and "." in s:
            s = s.rstrip("0").rstrip(".")
    return s.replace("-", MINUS)


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


def flatten(values: Any) -> list[float]:
    """Nested lists/tuples or a scalar → flat list of floats (None → [])."""
    if values is None:
        return []
    if isinstance(values, (list, tuple)):
        return [x for item in values for x in flatten(item)]
    return [float(values)]


def tensor_stats(values: Any) -> dict:
    flat = flatten(values)
    if not flat:
        return {"min": None, "max": None, "mean": None, "count": 0}
    if any(math.isnan(x) for x in flat):
        nan = float("nan")
        return {"min": nan, "max": nan, "mean": nan, "count": len(flat)}
    return {"min": min(flat), "max": max(flat), "mean": math.fsum(flat) / len(flat), "count": len(flat)}


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


# ---------------------------------------------------------------- probabilities


@dataclass(frozen=True)
class ProbabilityBar:
    index: int
    label: str  # "choice 2 ✓ correct"
    correct: bool
    probability: float
    log_prob: float
    value_text: str  # "p = 0.412 (log p = −0.887)"
    x: float
    y: float
    width: float
    height: float
    text_y: float  # baseline of the label/value line above the bar


@dataclass(frozen=True)
class ProbabilityBars:
    width: float
    height: float
    track_x: float
    track_width: float  # the width of p = 1
    value_x: float  # right edge of the track: value texts end there
    bars: tuple[ProbabilityBar, ...]
    grid: tuple[Tick, ...]  # vertical lines at p = 0, 0.25, … with labels underneath
    grid_top: float
    grid_bottom: float
    grid_label_y: float
    total: float  # Σp, 1 for a log-softmax row
    summary: str
    caption: str


def probability_bars(
    log_probs: Sequence[float],
    correct: int | None = None,
    labels: Sequence[str] | None = None,
    width: float = 320,
    bar_height: float = 22,
) -> ProbabilityBars:
    lps = [float(v) for v in log_probs]
    if not lps:
        raise ValueError("probability_bars needs at least one log-probability")
    if labels is not None and len(labels) != len(lps):
        raise ValueError(f"{len(labels)} labels for {len(lps)} log-probabilities")
    if correct is not None and not 0 <= correct < len(lps):
        raise ValueError(f"correct={correct} is not a choice index (0 … {len(lps) - 1})")
    pad, text_h, gap = 8.0, 18.0, 10.0
    track_x, track_w = pad + 6, width - 2 * pad - 12  # room for the centred "0" and "1" under the ends
    row_h = text_h + bar_height + gap
    bars = []
    for i, lp in enumerate(lps):
        p = math.exp(lp) if not math.isnan(lp) else float("nan")
        name = str(labels[i]) if labels is not None else f"choice {i}"
        is_correct = i == correct
        top = pad + i * row_h
        frac = min(max(p, 0.0), 1.0) if not math.isnan(p) else 0.0
        bars.append(ProbabilityBar(
            index=i, label=name + (" ✓ correct" if is_correct else ""), correct=is_correct,
            probability=p, log_prob=lp, value_text=f"p = {fmt(p)} (log p = {fmt(lp)})",
            x=_r(track_x), y=_r(top + text_h), width=_r(frac * track_w), height=_r(bar_height),
            text_y=_r(top + text_h - 5),
        ))
    grid_bottom = pad + len(lps) * row_h - gap
    ticks = nice_ticks(0.0, 1.0, 5)
    grid = tuple(Tick(t, _r(track_x + t * track_w), tick_label(t, ticks)) for t in ticks)
    total = math.fsum(b.probability for b in bars)
    listing = "; ".join(f"{b.label}: {fmt(b.probability)}" for b in bars)
    caption = "Bar length is the probability; the full width is p = 1."
    if correct is not None:
        caption += " The hatched bar marked ✓ correct is the choice the accuracy reward pays for."
    return ProbabilityBars(
        width=_r(width), height=_r(grid_bottom + 22), track_x=_r(track_x), track_width=_r(track_w),
        value_x=_r(track_x + track_w), bars=tuple(bars), grid=grid, grid_top=_r(pad + text_h), grid_bottom=_r(grid_bottom),
        grid_label_y=_r(grid_bottom + 14), total=total,
        summary=f"Probabilities of {len(bars)} choices (sum {fmt(total, 4)}): {listing}.",
        caption=caption,
    )


# ---------------------------------------------------------------- advantages


@dataclass(frozen=True)
class AdvantageBar:
    index: int
    advantage: float
    reward: float
    clip_active: bool
    sign: int  # +1 drawn up (solid), −1 drawn down (hatched), 0 no bar
    x: float
    y: float
    width: float
    height: float
    cx: float  # centre of the slot, for the texts
    value_text: str
    value_y: float
    index_text: str  # "#3"
    reward_text: str  # "r = 1"
    title: str  # tooltip / accessible name of the bar


@dataclass(frozen=True)
class AdvantageBars:
    width: float
    height: float
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    plot_width: float
    plot_height: float
    zero_y: float
    y_max: float  # the y range is [−y_max, +y_max]
    bars: tuple[AdvantageBar, ...]
    labelled: bool  # False when the slots are too narrow for per-bar texts
    index_y: float
    reward_y: float
    clip_y: float
    zero_label: Text
    range_labels: tuple[Text, ...]  # +y_max at the top, −y_max at the bottom
    all_zero: bool
    note: str  # full text of the note lines ("" when none)
    note_lines: tuple[Text, ...]
    summary: str
    caption: str


ALL_ZERO_NOTE = ("all advantages are 0:", "this group teaches nothing", "through the surrogate")


def advantage_bars(
    advantages: Sequence[float],
    rewards: Sequence[float],
    clip_active: Sequence[bool] | None = None,
    width: float = 360,
    height: float = 200,
    max_bars: int = 256,
) -> AdvantageBars:
    adv = [float(a) for a in advantages]
    rew = [float(r) for r in rewards]
    if not adv:
        raise ValueError("advantage_bars needs at least one advantage")
    if len(rew) != len(adv) or (clip_active is not None and len(clip_active) != len(adv)):
        raise ValueError("advantages, rewards and clip_active must have the same length")
    clip = [bool(c) for c in clip_active] if clip_active is not None else [False] * len(adv)
    finite = [abs(a) for a in adv if math.isfinite(a)]
    max_abs = max(finite, default=0.0)
    all_zero = max_abs <= ZERO_ADVANTAGE and len(finite) == len(adv)
    y_max = max(max_abs, 1e-9)
    gutter, right, top = 92.0, 8.0, 20.0
    text_rows = 3 if any(clip) else 2
    bottom = 16.0 + 14.0 * text_rows
    plot_l, plot_r, plot_t, plot_b = gutter, width - right, top, height - bottom
    zero_y = (plot_t + plot_b) / 2
    half = (plot_b - plot_t) / 2
    shown = min(len(adv), max_bars)
    slot = (plot_r - plot_l) / shown
    labelled = slot >= 30
    bar_w = max(slot * 0.7, 1.0)
    bars = []
    for i in range(shown):
        a = adv[i]
        sign = 0 if not math.isfinite(a) or abs(a) <= ZERO_ADVANTAGE else (1 if a > 0 else -1)
        h = min(abs(a) / y_max, 1.0) * half if sign else 0.0
        cx = plot_l + (i + 0.5) * slot
        value_y = zero_y - h - 4 if sign >= 0 else zero_y + h + 12
        state = ", clip active (∂loss/∂ρ = 0)" if clip[i] else ""
        bars.append(AdvantageBar(
            index=i, advantage=a, reward=rew[i], clip_active=clip[i], sign=sign,
            x=_r(cx - bar_w / 2), y=_r(zero_y - h if sign > 0 else zero_y), width=_r(bar_w),
            height=_r(h), cx=_r(cx), value_text=fmt(a), value_y=_r(value_y),
            index_text=f"#{i}", reward_text=f"r = {fmt(rew[i], strip=True)}",
            title=f"sample {i}: reward {fmt(rew[i], strip=True)}, advantage {fmt(a)}{state}",
        ))
    notes: list[str] = list(ALL_ZERO_NOTE) if all_zero else []
    if shown < len(adv):
        notes.append(f"showing the first {shown} of {len(adv)} samples")
    note_lines = tuple(  # in the upper half, clear of the value texts on the zero line
        Text(_r((plot_l + plot_r) / 2), _r(plot_t + 16 + 14 * k), line, "middle") for k, line in enumerate(notes)
    )
    finite_adv = [a for a in adv if math.isfinite(a)]
    pos, neg = sum(a > ZERO_ADVANTAGE for a in finite_adv), sum(a < -ZERO_ADVANTAGE for a in finite_adv)
    summary = (
        f"Advantages of {len(adv)} samples: all 0, this group teaches nothing through the surrogate."
        if all_zero else
        f"Advantages of {len(adv)} samples, from {fmt(min(finite_adv, default=math.nan))} "
        f"to {fmt(max(finite_adv, default=math.nan))}: "
        f"{pos} above the group mean, {neg} below"
        + (f", {sum(clip)} clip active." if clip_active is not None else ".")
    )
    caption = "Bars above the 0 line (group mean) are A > 0 (solid); bars below are A < 0 (hatched)."
    if labelled:
        caption += " Under each bar: the sample index and its reward."
    if any(clip):
        caption += " Dashed outline and “clip”: the clip is active, ∂loss/∂ρ = 0."
    return AdvantageBars(
        width=_r(width), height=_r(height), plot_left=_r(plot_l), plot_right=_r(plot_r),
        plot_top=_r(plot_t), plot_bottom=_r(plot_b),
        plot_width=_r(plot_r - plot_l), plot_height=_r(plot_b - plot_t), zero_y=_r(zero_y), y_max=y_max,
        bars=tuple(bars), labelled=labelled,
        index_y=_r(plot_b + 28), reward_y=_r(plot_b + 42), clip_y=_r(plot_b + 56),
        zero_label=Text(_r(plot_l - 6), _r(zero_y + 4), "0 (group mean)", "end"),
        range_labels=(
            Text(_r(plot_l - 6), _r(plot_t + 4), fmt(y_max) if not all_zero else "", "end"),
            Text(_r(plot_l - 6), _r(plot_b + 4), fmt(-y_max) if not all_zero else "", "end"),
        ),
        all_zero=all_zero, note=" ".join(notes), note_lines=note_lines,
        summary=summary, caption=caption,
    )


# ---------------------------------------------------------------- clip plot


def surrogate_over_abs_a(rho: float, epsilon: float, sign: int) -> float:
    """L(ρ)/|A| for an advantage of the given sign (0 for A = 0)."""
    clipped = min(max(rho, 1 - epsilon), 1 + epsilon)
    if sign > 0:
        return min(rho, clipped)
    if sign < 0:
        return -max(rho, clipped)
    return 0.0


def _marker_path(shape: str, cx: float, cy: float, h: float) -> str:
    x0, x1, y0, y1 = _r(cx - h), _r(cx + h), _r(cy - h), _r(cy + h)
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
class ClipPlot:
    width: float
    height: float
    epsilon: float
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    plot_width: float
    plot_height: float
    x_ticks: tuple[Tick, ...]  # drawn as grid lines, labels at y = x_tick_label_y
    y_ticks: tuple[Tick, ...]  # labels end at x = y_tick_label_x
    x_tick_label_y: float
    y_tick_label_x: float
    zero_y: float
    band_x: float
    band_width: float
    band_labels: tuple[Text, Text]  # "1−ε = 0.8" and "1+ε = 1.2" at the band's edges
    curves: tuple[Curve, Curve]
    markers: tuple[Marker, ...]
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
    width: float = 420,
    height: float = 280,
    max_markers: int = 200,
) -> ClipPlot:
    eps = float(epsilon)
    if not 0 < eps < 1:
        raise ValueError(f"epsilon must lie in (0, 1), got {eps}")
    pts = []
    for i, s in enumerate(samples):
        rho, a = float(s["ratio"]), float(s["advantage"])
        if math.isfinite(rho) and math.isfinite(a):
            sign = 0 if abs(a) <= ZERO_ADVANTAGE else (1 if a > 0 else -1)
            value = float(s["clipped"]) / abs(a) if sign else 0.0
            pts.append((i, rho, sign, value, bool(s["clip_active"]) and sign != 0, s))
    ratios = [p[1] for p in pts]
    x_lo = max(0.0, min(min(ratios, default=1.0), 1 - 2 * eps) - 0.1)
    x_hi = max(max(ratios, default=1.0), 1 + 2 * eps) + 0.1
    xs = [x_lo] + [b for b in (1 - eps, 1 + eps) if x_lo < b < x_hi] + [x_hi]
    ys = [surrogate_over_abs_a(x, eps, s) for x in xs for s in (1, -1)] + [0.0] + [p[3] for p in pts]
    pad = 0.08 * (max(ys) - min(ys))
    y_lo, y_hi = min(ys) - pad, max(ys) + pad

    left, right, top = 52.0, 12.0, 24.0
    plot_l, plot_r, plot_t, plot_b = left, width - right, top, height - 80.0

    def sx(v: float) -> float:
        return _r(plot_l + (v - x_lo) / (x_hi - x_lo) * (plot_r - plot_l))

    def sy(v: float) -> float:
        return _r(plot_b - (v - y_lo) / (y_hi - y_lo) * (plot_b - plot_t))

    xt, yt = nice_ticks(x_lo, x_hi), nice_ticks(y_lo, y_hi)
    curves = []
    for sign in (1, -1):
        data = tuple((x, surrogate_over_abs_a(x, eps, sign)) for x in xs)
        # right-aligned at the right end, just above the highest point of the curve under the text
        text = "A > 0 (A = +1)" if sign > 0 else f"A < 0 (A = {MINUS}1)"
        x0 = x_hi - (len(text) * 6.6 + 4) / (plot_r - plot_l) * (x_hi - x_lo)
        top_value = max(surrogate_over_abs_a(x, eps, sign) for x in [x0, x_hi, *xs] if x >= x0)
        label = Text(_r(plot_r - 4), _r(max(sy(top_value) - 6, plot_t + 10)), text, "end")
        curves.append(Curve(sign, data, " ".join(f"{sx(x)},{sy(y)}" for x, y in data), sign < 0, label))

    band_l, band_r = sx(1 - eps), sx(1 + eps)
    lo_text, hi_text = f"1{MINUS}ε = {fmt(1 - eps, 4, True)}", f"1+ε = {fmt(1 + eps, 4, True)}"
    lo_w, hi_w = len(lo_text) * CHAR_W, len(hi_text) * CHAR_W
    lo_label = Text(_r(band_l - 2), _r(plot_t - 6), lo_text, "end") if band_l - lo_w >= 2 \
        else Text(_r(band_l + 2), _r(plot_t - 6), lo_text, "start")
    hi_inside = band_r + hi_w > width - 2
    hi_row = plot_t - 18 if hi_inside and lo_label.anchor == "start" else plot_t - 6
    hi_label = Text(_r(band_r - 2), _r(hi_row), hi_text, "end") if hi_inside \
        else Text(_r(band_r + 2), _r(hi_row), hi_text, "start")

    shapes = {1: "circle", -1: "square", 0: "cross"}
    groups: dict[tuple, list] = {}
    for p in pts:
        i, rho, sign, value, hollow, _s = p
        groups.setdefault((shapes[sign], hollow, sx(rho), sy(value)), []).append(p)
    markers, count_labels = [], []
    for (shape, hollow, cx, cy), members in groups.items():
        per_sample = len(pts) <= max_markers
        for chunk in ([[m] for m in members] if per_sample else [members]):
            i, rho, sign, value, _h, s = chunk[0]
            who = f"sample {i}" if len(chunk) == 1 else f"{len(chunk)} samples"
            markers.append(Marker(
                indices=tuple(m[0] for m in chunk), shape=shape, hollow=hollow, ratio=rho, value=value,
                cx=cx, cy=cy, size=5.0 if shape == "circle" else 4.5,
                d=_marker_path(shape, cx, cy, 4.5),
                title=(f"{who}: action {s.get('action', '?')}, reward {fmt(float(s.get('reward', 0)), strip=True)}, "
                       f"A = {fmt(float(s['advantage']))}, ρ = {fmt(rho)}, L = {fmt(float(s['clipped']))}"
                       + (", clip active: ∂loss/∂ρ = 0" if hollow else "")),
            ))
        if len(members) > 1:
            count_labels.append(Text(_r(cx + 8), _r(cy - 6), f"×{len(members)}"))

    ly = plot_b + 52
    legend = tuple(
        LegendItem(shape, hollow, _r(x), _r(y), 5.0 if shape == "circle" else 4.5,
                   _marker_path(shape, _r(x), _r(y), 4.5), Text(_r(x + 10), _r(y + 4), text))
        for shape, hollow, x, y, text in (
            ("circle", False, plot_l + 6, ly, "A > 0 sample"),
            ("square", False, plot_l + 116, ly, "A < 0 sample"),
            ("cross", False, plot_l + 226, ly, "A = 0 sample"),
            ("circle", True, plot_l + 6, ly + 18, "hollow = clip active: ∂loss/∂ρ = 0"),
        )
    )
    n_active = sum(1 for p in pts if p[4])
    skipped = len(samples) - len(pts)
    summary = (
        f"Clipped surrogate L/|A| against the ratio ρ for ε = {fmt(eps, 4, True)}: flat (no gradient) "
        f"above {fmt(1 + eps, 4, True)} for A > 0 and below {fmt(1 - eps, 4, True)} for A < 0. "
        + (f"{len(pts)} samples, ratios {fmt(min(ratios))} to {fmt(max(ratios))}, "
           f"{n_active} clip active." if pts else "No samples.")
        + (f" Not drawn: {skipped} with a non-finite ratio or advantage." if skipped else "")
    )
    caption = (
        f"L(ρ) = min(ρA, clip(ρ, 1{MINUS}ε, 1+ε)A) divided by |A|; solid line A > 0, dashed line A < 0. "
        f"Hatched band: the clip range [{fmt(1 - eps, 4, True)}, {fmt(1 + eps, 4, True)}]. "
        "Hollow markers: clip active, ∂loss/∂ρ = 0."
    )
    return ClipPlot(
        width=_r(width), height=_r(height), epsilon=eps, x_range=(x_lo, x_hi), y_range=(y_lo, y_hi),
        plot_left=_r(plot_l), plot_right=_r(plot_r), plot_top=_r(plot_t), plot_bottom=_r(plot_b),
        plot_width=_r(plot_r - plot_l), plot_height=_r(plot_b - plot_t),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=_r(plot_b + 16), y_tick_label_x=_r(plot_l - 6),
        zero_y=sy(0.0), band_x=band_l, band_width=_r(band_r - band_l), band_labels=(lo_label, hi_label),
        curves=tuple(curves), markers=tuple(markers), count_labels=tuple(count_labels), legend=legend,
        x_label=Text(_r((plot_l + plot_r) / 2), _r(plot_b + 32), "ratio ρ = π/π_old", "middle"),
        y_label=Text(14.0, _r((plot_t + plot_b) / 2), "surrogate L / |A|", "middle"),
        clip_active_count=n_active, summary=summary, caption=caption,
    )


# ---------------------------------------------------------------- template helpers
# Short names for templates/_inspector.html, which calls them on a `charts` global
# (the app module itself), straight from the engine's StepResult.


def probabilities(row: Sequence[float], correct: int | None = None) -> ProbabilityBars:
    return probability_bars(row, correct)


def advantages(samples: Sequence[dict]) -> AdvantageBars:
    return advantage_bars([s["advantage"] for s in samples], [s["reward"] for s in samples],
                          [s["clip_active"] for s in samples])


def clip(epsilon: float, samples: Sequence[dict]) -> ClipPlot:
    return clip_plot(epsilon, samples)
