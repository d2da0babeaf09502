"""Group advantages as bars around zero, with each sample's reward and clip state."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.views.charts.frame import ZERO_ADVANTAGE, Box, Hit, PlotFrame, Text, frame_fields, r2
from app.views.numbers import significant


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
    hit: Hit  # the bar's whole slot, labels included; also the outline drawn when highlighted
    underline: Box  # drawn under the index text while the sample is highlighted


@dataclass(frozen=True)
class AdvantageBars(PlotFrame):
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
    labels: Sequence[str] | None = None,
    width: float = 440,
    height: float = 200,
    max_bars: int = 256,
) -> AdvantageBars:
    adv = [float(a) for a in advantages]
    rew = [float(r) for r in rewards]
    if not adv:
        raise ValueError("advantage_bars needs at least one advantage")
    if len(rew) != len(adv) or any(s is not None and len(s) != len(adv) for s in (clip_active, labels)):
        raise ValueError("advantages, rewards, clip_active and labels must have the same length")
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
        state = ", clip active (∂L/∂ρ = 0)" if clip[i] else ""
        who = f"sample {i} ({labels[i]})" if labels is not None else f"sample {i}"
        title = f"{who}: reward {significant(rew[i], strip=True)}, advantage {significant(a)}{state}"
        bars.append(AdvantageBar(
            index=i, advantage=a, reward=rew[i], clip_active=clip[i], sign=sign,
            x=r2(cx - bar_w / 2), y=r2(zero_y - h if sign > 0 else zero_y), width=r2(bar_w),
            height=r2(h), cx=r2(cx), value_text=significant(a), value_y=r2(value_y),
            index_text=f"#{i}", reward_text=f"r = {significant(rew[i], strip=True)}",
            title=title, underline=Box(r2(cx - min(bar_w, 24) / 2), r2(plot_b + 31), r2(min(bar_w, 24)), 2.5),
            hit=Hit(r2(plot_l + i * slot + 0.5), r2(plot_t - 2), r2(max(slot - 1, 1.0)),
                    r2(height - 3 - (plot_t - 2)), title, samples=(i,)),
        ))
    notes: list[str] = list(ALL_ZERO_NOTE) if all_zero else []
    if shown < len(adv):
        notes.append(f"showing the first {shown} of {len(adv)} samples")
    note_lines = tuple(  # in the upper half, clear of the value texts on the zero line
        Text(r2((plot_l + plot_r) / 2), r2(plot_t + 16 + 14 * k), line, "middle") for k, line in enumerate(notes)
    )
    finite_adv = [a for a in adv if math.isfinite(a)]
    pos, neg = sum(a > ZERO_ADVANTAGE for a in finite_adv), sum(a < -ZERO_ADVANTAGE for a in finite_adv)
    summary = (
        f"Advantages of {len(adv)} samples: all 0, this group teaches nothing through the surrogate."
        if all_zero else
        f"Advantages of {len(adv)} samples, from {significant(min(finite_adv, default=math.nan))} "
        f"to {significant(max(finite_adv, default=math.nan))}: "
        f"{pos} above the group mean, {neg} below"
        + (f", {sum(clip)} clip active." if clip_active is not None else ".")
    )
    caption = "Bars above the 0 line (group mean) are A > 0 (solid); bars below are A < 0 (hatched)."
    if labelled:
        caption += " Under each bar: the sample index and its reward."
    if any(clip):
        caption += " Dashed outline and “clip”: the clip is active, ∂L/∂ρ = 0."
    return AdvantageBars(
        **frame_fields(width, height, plot_l, plot_r, plot_t, plot_b), zero_y=r2(zero_y), y_max=y_max,
        bars=tuple(bars), labelled=labelled,
        index_y=r2(plot_b + 28), reward_y=r2(plot_b + 42), clip_y=r2(plot_b + 56),
        zero_label=Text(r2(plot_l - 6), r2(zero_y + 4), "0 (group mean)", "end"),
        range_labels=(
            Text(r2(plot_l - 6), r2(plot_t + 4), significant(y_max) if not all_zero else "", "end"),
            Text(r2(plot_l - 6), r2(plot_b + 4), significant(-y_max) if not all_zero else "", "end"),
        ),
        all_zero=all_zero, note=" ".join(notes), note_lines=note_lines,
        summary=summary, caption=caption,
    )
