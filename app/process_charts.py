"""Geometry of the training-path panel (templates/_process_panel.html draws it).

Pure Python, the conventions of app/charts.py: frozen dataclasses in SVG user
units rounded to 2 decimals, texts already formatted, so the template only
places elements. Input: the dicts of app/process_payloads.py (DESIGN.md §4).
Meaning never rests on colour: stage kinds differ by dash pattern, series by
dashes and marker shapes, processes by fill pattern, and everything is labelled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .charts import CHAR_W, Text, Tick, _r, fmt, nice_ticks, tick_label

KIND_LABELS = {"sft": "SFT", "grpo": "GRPO", "rejection_sampling": "Rejection sampling",
               "distill_sft": "Distillation SFT"}
KIND_DASH = {"grpo": "", "sft": "7 4", "rejection_sampling": "2 3", "distill_sft": "9 3 2 3"}
ROLE_LABELS = {"correct": "readable correct", "mixed": "mixed-language correct",
               "unformatted": "right but unformatted", "wrong": "wrong"}
SMALL_W = 5.6  # one character of 10px text


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def wrap(text: str, max_chars: int, max_lines: int = 3) -> list[str]:
    """Greedy word wrap; long words break after a hyphen; an overflow ends in …."""
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


# ---------------------------------------------------------------- pipeline


@dataclass(frozen=True)
class StageBox:
    number: int  # 1-based
    id: str
    kind: str
    kind_label: str
    title: str
    x: float
    y: float
    width: float
    height: float
    dash: str  # stroke-dasharray, "" = solid (GRPO)
    badge: Text
    title_lines: tuple[Text, ...]
    from_note: Text | None  # "from base" when the stage does not start from the incoming arrow
    selected: bool
    selected_mark: Text | None  # "▶ selected" above the box
    ring: tuple[float, float, float, float] | None  # x, y, w, h of the selection frame
    aria_label: str


@dataclass(frozen=True)
class Arrow:
    source: str  # "start" or a stage id
    target: str
    d: str
    label: Text  # the checkpoint or dataset passed along ("" for the first arrow)
    role: Text  # "checkpoint" | "dataset"


@dataclass(frozen=True)
class Pipeline:
    width: float
    height: float
    start_x: float
    start_y: float
    start_width: float
    start_height: float
    start_name: Text  # "base", "student-base", "r1"
    start_role: Text  # "start" or "teacher" (distillation samples from R1)
    boxes: tuple[StageBox, ...]
    arrows: tuple[Arrow, ...]
    selected: str | None
    summary: str
    caption: str


def _handoff(prev_output: str, stage: dict) -> str:
    if stage.get("data") == prev_output:
        return "dataset"
    return "checkpoint" if stage.get("start") == prev_output else "then"


def pipeline(process: dict, selected_stage: str | None, width: float = 720, per_row: int = 3) -> Pipeline:
    stages = list(process["stages"])
    if not stages:
        raise ValueError("pipeline needs at least one stage")
    margin, chip_w, gap, top, box_h, row_gap = 8.0, 80.0, 80.0, 22.0, 80.0, 46.0
    cols = min(per_row, len(stages))
    box_w = min(170.0, (width - 2 * margin - chip_w - cols * gap) / cols)
    rows = math.ceil(len(stages) / cols)
    title_chars, badge_chars = int((box_w - 12) / 6.6), int((box_w - 12) / 6.0)  # bold text
    first = stages[0]
    boxes, arrows = [], []
    prev: StageBox | None = None
    for i, st in enumerate(stages):
        r, c = divmod(i, cols)
        x, y = margin + chip_w + gap + c * (gap + box_w), top + r * (box_h + row_gap)
        mid, label = y + box_h / 2, kind_label(st["kind"])
        sel = st["id"] == selected_stage
        badge = f"{i + 1} · {label}" if len(label) + 4 <= badge_chars else label
        incoming = prev_output = stages[i - 1]["output"] if i else first["start"]
        note = None if st["start"] == incoming else Text(_r(x + 6), _r(y + box_h - 8), f"from {st['start']}")
        box = StageBox(
            number=i + 1, id=st["id"], kind=st["kind"], kind_label=label, title=st["title"],
            x=_r(x), y=_r(y), width=_r(box_w), height=box_h, dash=KIND_DASH.get(st["kind"], "4 2"),
            badge=Text(_r(x + 6), _r(y + 15), badge),
            title_lines=tuple(Text(_r(x + 6), _r(y + 32 + 13 * k), line)
                              for k, line in enumerate(wrap(st["title"], title_chars, 3 if note is None else 2))),
            from_note=note, selected=sel,
            selected_mark=Text(_r(x), _r(y - 8), "▶ selected") if sel else None,
            ring=(_r(x - 4), _r(y - 4), _r(box_w + 8), _r(box_h + 8)) if sel else None,
            aria_label=f"Stage {i + 1}: {st['title']} ({label})" + (", selected" if sel else ""),
        )
        if prev is None:
            x0 = margin + chip_w
            d, lx = f"M{_r(x0)} {_r(mid)}H{_r(x - 2)}", (x0 + x) / 2
            arrows.append(Arrow("start", st["id"], d, Text(_r(lx), _r(mid - 6), "", "middle"),
                                Text(_r(lx), _r(mid + 14), "", "middle")))
        else:
            if c:  # same row: straight
                x0 = prev.x + prev.width
                d = f"M{_r(x0)} {_r(mid)}H{_r(x - 2)}"
            else:  # wrap: down from the last box, back to the left, into this row
                x0 = margin + chip_w / 2
                d = (f"M{_r(prev.x + prev.width / 2)} {_r(prev.y + box_h)}V{_r(prev.y + box_h + 14)}"
                     f"H{_r(x0)}V{_r(mid)}H{_r(x - 2)}")
            lx = (x0 + x) / 2
            arrows.append(Arrow(stages[i - 1]["id"], st["id"], d,
                                Text(_r(lx), _r(mid - 6), prev_output, "middle"),
                                Text(_r(lx), _r(mid + 14), _handoff(prev_output, st), "middle")))
        boxes.append(box)
        prev = box
    chip_y = top + box_h / 2 - 22
    teacher = first["kind"] == "rejection_sampling"
    order = " → ".join(f"{b.number}. {b.title} ({b.kind_label})" for b in boxes)
    chosen = next((b for b in boxes if b.selected), None)
    summary = (f"Pipeline of {process['title']}: starts from {first['start']}"
               + (" (the teacher)" if teacher else "") + f"; {order}."
               + (f" Selected: stage {chosen.number}, {chosen.title}." if chosen else ""))
    caption = ("Solid thick border: GRPO (RL); dashed: SFT; dotted: rejection sampling; dash-dot: "
               "distillation SFT. Arrows carry the checkpoint or dataset named on them; "
               "“from …” marks a stage that restarts from another checkpoint.")
    return Pipeline(
        width=_r(2 * margin + chip_w + cols * (gap + box_w)), height=_r(top + rows * box_h + (rows - 1) * row_gap + 10),
        start_x=margin, start_y=_r(chip_y), start_width=chip_w, start_height=44.0,
        start_name=Text(_r(margin + chip_w / 2), _r(chip_y + 32), first["start"], "middle"),
        start_role=Text(_r(margin + chip_w / 2), _r(chip_y + 15), "teacher" if teacher else "start", "middle"),
        boxes=tuple(boxes), arrows=tuple(arrows), selected=chosen.id if chosen else None,
        summary=summary, caption=caption,
    )


# ---------------------------------------------------------------- stage curves


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
class LineChart:
    key: str
    title: str
    width: float
    height: float
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    plot_width: float
    plot_height: float
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
    lo, hi = min(values + [0.0]), max(values + [0.0])
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
        return _r(pl + (v - x_lo) / (x_hi - x_lo) * (pr - pl))

    def sy(v: float) -> float:
        return _r(pb - (v - y_lo) / (y_hi - y_lo) * (pb - pt))

    finals = [s[2][-1][1] for s in specs]
    series, used_y = [], []
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
            end_d=f"M{_r(ex - 3.5)} {_r(ey - 3.5)}h7v7h-7Z" if dashed else "",
            label_text=Text(_r(pr - 3), _r(y), lab, "end"),
        ))
    xt, yt = nice_ticks(x_lo, x_hi, 5), nice_ticks(y_lo, y_hi, 4)
    listing = "; ".join(f"{s.label} {fmt(s.points[0][1])} at iteration {int(s.points[0][0])} → "
                        f"{fmt(s.points[-1][1])} at iteration {int(s.points[-1][0])}" for s in series)
    caption = "x: training iteration (0 = the stage's start checkpoint)."
    if len(series) > 1:
        caption += f" Solid line with ● end: {series[0].label}; dashed with ■ end: " \
                   + ", ".join(s.label for s in series[1:]) + "."
    return LineChart(
        key=key, title=title, width=_r(width), height=_r(height), plot_left=pl, plot_right=_r(pr),
        plot_top=pt, plot_bottom=_r(pb), plot_width=_r(pr - pl), plot_height=_r(pb - pt),
        x_range=(x_lo, x_hi), y_range=(y_lo, y_hi),
        x_ticks=tuple(Tick(v, sx(v), tick_label(v, xt)) for v in xt),
        y_ticks=tuple(Tick(v, sy(v), tick_label(v, yt)) for v in yt),
        x_tick_label_y=_r(pb + 14), y_tick_label_x=_r(pl - 5),
        zero_y=sy(0.0) if y_lo < 0 < y_hi else None, series=tuple(series),
        x_label=Text(_r((pl + pr) / 2), _r(pb + 32), "iteration", "middle"),
        y_label=Text(12.0, _r((pt + pb) / 2), y_label, "middle"),
        summary=f"{title}: {listing}.", caption=caption,
    )


def stage_curves(stage: dict) -> list[LineChart]:
    """One small chart per metric; [] for a stage that does not train (rejection sampling)."""
    curve = list(stage.get("curve") or [])
    if not curve:
        return []
    start = stage["start_metrics"]

    def pts(key: str, with_start: bool = True) -> list:
        return ([(0, start.get(key))] if with_start else []) + [(p["iteration"], p.get(key)) for p in curve]

    rl = stage["kind"] == "grpo"
    charts = [
        line_chart("reward", "Reward", "reward (max 2)",
                   [("eval_reward", "eval reward", pts("eval_reward")),
                    ("train_reward", "sampled-group reward", pts("train_reward", False))], (0.0, 2.0)),
        line_chart("accuracy", "Accuracy", "share right", [("accuracy", "accuracy", pts("accuracy"))], (0.0, 1.0)),
        line_chart("language", "Readable vs mixed-language answers", "probability",
                   [("p_correct", "readable correct", pts("p_correct")),
                    ("p_mixed", "mixed language", pts("p_mixed"))], (0.0, 1.0)),
        line_chart("divergence", f"Divergence from {stage['reference']}", "KL",
                   [("divergence", "divergence", pts("divergence"))]),
    ]
    if any(p.get("loss") is not None for p in curve):
        charts.append(line_chart("loss", "GRPO loss (−J)" if rl else "Cross-entropy loss", "loss",
                                 [("loss", "loss", pts("loss", False))]))
    return charts


def sampling_note(stage: dict) -> str:
    per = stage.get("samples_per_prompt")
    how = f"samples {per} answers per prompt" if per else f"samples {stage.get('sampled', 0)} answers"
    return (f"No training: this stage {how} from {stage['start']} and keeps "
            f"{stage.get('dataset_size', 0)} of {stage.get('sampled', 0)} (those every reward component pays).")


def role_rows(stage: dict) -> list[tuple[str, str]]:
    """(answer role, reward) rows of the stage's reward rule, in a fixed order."""
    by_role = stage.get("reward_by_role") or {}
    order = [r for r in ROLE_LABELS if r in by_role] + [r for r in by_role if r not in ROLE_LABELS]
    return [(ROLE_LABELS.get(r, r), fmt(by_role[r], strip=True)) for r in order]


# ---------------------------------------------------------------- comparison


@dataclass(frozen=True)
class CompareBar:
    process_id: str
    title: str
    value: float
    pattern: int  # 0 solid, 1 hatched, 2 dotted (per process, in payload order)
    x: float
    y: float
    width: float
    height: float
    name: Text  # the process title, left of the bar
    value_text: Text  # right of the bar end


@dataclass(frozen=True)
class CompareGroup:
    key: str
    heading: Text
    scale_max: float  # the track's full width stands for this value
    track_x: float
    track_width: float
    bars: tuple[CompareBar, ...]


@dataclass(frozen=True)
class ComparisonChart:
    width: float
    height: float
    groups: tuple[CompareGroup, ...]
    summary: str
    caption: str


COMPARE_METRICS = (  # key, short name, heading, fixed scale (None: from the data)
    ("accuracy", "accuracy", "Final accuracy (share of the six prompts)", 1.0),
    ("eval_reward", "eval reward", "Eval reward (max 2)", 2.0),
    ("divergence", "divergence", "Divergence from the starting checkpoint (KL, lower = closer)", None),
    ("p_correct", "P(readable correct)", "P(readable correct answer)", 1.0),
    ("p_mixed", "P(mixed language)", "P(mixed-language answer)", 1.0),
)


def comparison(payload: dict, width: float = 640, bar_h: float = 16) -> ComparisonChart:
    procs = list(payload["processes"])
    if not procs:
        raise ValueError("comparison needs at least one process")
    gutter = max(len(p["title"]) for p in procs) * CHAR_W + 14
    track_x, track_w = gutter, width - gutter - 56
    groups, y = [], 8.0
    for key, _short, name, fixed in COMPARE_METRICS:
        vals = [float(p["final"][key]) for p in procs]
        top = max(vals + [0.0])
        scale = fixed if fixed is not None and top <= fixed else \
            next((t for t in nice_ticks(0.0, top * 1.25 or 1.0, 5) if t >= top), top * 1.25 or 1.0)
        heading = Text(8.0, _r(y + 12), f"{name} · scale 0 – {fmt(scale, strip=True)}")
        bars = []
        for k, (p, v) in enumerate(zip(procs, vals)):
            by = y + 20 + k * (bar_h + 4)
            w = max(v, 0.0) / scale * track_w
            bars.append(CompareBar(
                process_id=p["id"], title=p["title"], value=v, pattern=k % 3, x=_r(track_x), y=_r(by),
                width=_r(w), height=bar_h, name=Text(_r(track_x - 6), _r(by + bar_h - 4), p["title"], "end"),
                value_text=Text(_r(track_x + w + 4), _r(by + bar_h - 4), fmt(v)),
            ))
        groups.append(CompareGroup(key, heading, scale, _r(track_x), _r(track_w), tuple(bars)))
        y += 20 + len(procs) * (bar_h + 4) + 14
    summary = "Toy numbers, final metrics of each path: " + "; ".join(
        f"{p['title']}: " + ", ".join(f"{short} {fmt(p['final'][k])}" for k, short, _h, _f in COMPARE_METRICS)
        for p in procs) + "."
    caption = ("Toy numbers from this server's run, not the paper's. Bar length is the value on the "
               "group's scale; each path keeps its fill pattern (solid, hatched, dotted) in every group.")
    return ComparisonChart(_r(width), _r(y), tuple(groups), summary, caption)
