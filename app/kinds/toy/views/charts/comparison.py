"""The three training paths' final metrics, side by side; each path keeps one fill pattern."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.kinds.toy.domain.process_spec import Process
from app.kinds.toy.engine.processes import Metrics
from app.views.charts.frame import CHAR_W, Text, nice_ticks, r2
from app.views.numbers import significant


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


def comparison(finals: Sequence[tuple[Process, Metrics]], width: float = 640, bar_h: float = 16) -> ComparisonChart:
    """`finals`: each path with the metrics of its final checkpoint, in catalog order."""
    procs = [p for p, _ in finals]
    final = {p.id: m for p, m in finals}
    if not procs:
        raise ValueError("comparison needs at least one process")
    gutter = max(len(p.title) for p in procs) * CHAR_W + 14
    track_x, track_w = gutter, width - gutter - 56
    groups, y = [], 8.0
    for key, _short, name, fixed in COMPARE_METRICS:
        vals = [float(getattr(final[p.id], key)) for p in procs]
        top = max(vals + [0.0])
        scale = fixed if fixed is not None and top <= fixed else \
            next((t for t in nice_ticks(0.0, top * 1.25 or 1.0, 5) if t >= top), top * 1.25 or 1.0)
        heading = Text(8.0, r2(y + 12), f"{name} · scale 0 – {significant(scale, strip=True)}")
        bars = []
        for k, (p, v) in enumerate(zip(procs, vals, strict=True)):
            by = y + 20 + k * (bar_h + 4)
            w = max(v, 0.0) / scale * track_w
            bars.append(CompareBar(
                process_id=p.id, title=p.title, value=v, pattern=k % 3, x=r2(track_x), y=r2(by),
                width=r2(w), height=bar_h, name=Text(r2(track_x - 6), r2(by + bar_h - 4), p.title, "end"),
                value_text=Text(r2(track_x + w + 4), r2(by + bar_h - 4), significant(v)),
            ))
        groups.append(CompareGroup(key, heading, scale, r2(track_x), r2(track_w), tuple(bars)))
        y += 20 + len(procs) * (bar_h + 4) + 14
    summary = "Toy numbers, final metrics of each path: " + "; ".join(
        f"{p.title}: " + ", ".join(f"{short} {significant(getattr(final[p.id], k))}"
                                   for k, short, _h, _f in COMPARE_METRICS)
        for p in procs) + "."
    caption = ("Toy numbers from this server's run, not the paper's. Bar length is the value on the "
               "group's scale; each path keeps its fill pattern (solid, hatched, dotted) in every group.")
    return ComparisonChart(r2(width), r2(y), tuple(groups), summary, caption)

