"""The training path's stages as boxes and arrows (docs/design.md §4).

Stage kinds differ by dash pattern as well as by label: meaning never rests on colour.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from app.kinds.toy.domain.process_spec import Process, Stage
from app.views.charts.frame import Text, r2, wrap

KIND_LABELS = {"sft": "SFT", "grpo": "GRPO", "rejection_sampling": "Rejection sampling",
               "distill_sft": "Distillation SFT"}
# Where a box is too narrow for "n · <label>": the number stays, the label shortens (its title and
# aria-label keep the whole name).
KIND_SHORT = {"rejection_sampling": "Rej. sampling", "distill_sft": "Distill. SFT"}
# The narrowest box: room for the badge "n · Rej. sampling" (17 bold characters, 6 units each, 6 a side)
MIN_BOX_W = 116.0
KIND_DASH = {"grpo": "", "sft": "7 4", "rejection_sampling": "2 3", "distill_sft": "9 3 2 3"}


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)



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


def _handoff(prev_output: str, stage: Stage) -> str:
    if stage.data == prev_output:
        return "dataset"
    return "checkpoint" if stage.start == prev_output else "then"


def pipeline(process: Process, selected_stage: str | None, width: float = 720, per_row: int = 3) -> Pipeline:
    stages = list(process.stages)
    if not stages:
        raise ValueError("pipeline needs at least one stage")
    margin, chip_w, gap, top, box_h, row_gap = 8.0, 80.0, 80.0, 22.0, 80.0, 46.0
    # as many boxes a row as fit at MIN_BOX_W (a phone's width takes one); a width too narrow even
    # for one keeps MIN_BOX_W, and the returned width says how wide the drawing really is
    room = width - 2 * margin - chip_w
    cols = max(1, min(per_row, len(stages), int(room // (gap + MIN_BOX_W))))
    box_w = max(MIN_BOX_W, min(170.0, (room - cols * gap) / cols))
    rows = math.ceil(len(stages) / cols)
    title_chars, badge_chars = int((box_w - 12) / 6.6), int((box_w - 12) / 6.0)  # bold text
    first = stages[0]
    boxes, arrows = [], []
    prev: StageBox | None = None
    for i, st in enumerate(stages):
        r, c = divmod(i, cols)
        x, y = margin + chip_w + gap + c * (gap + box_w), top + r * (box_h + row_gap)
        mid, label = y + box_h / 2, kind_label(st.kind)
        sel = st.id == selected_stage
        badge = f"{i + 1} · {label}" if len(label) + 4 <= badge_chars else f"{i + 1} · {KIND_SHORT.get(st.kind, label)}"
        incoming = prev_output = stages[i - 1].output if i else first.start
        note = None if st.start == incoming else Text(r2(x + 6), r2(y + box_h - 8), f"from {st.start}")
        box = StageBox(
            number=i + 1, id=st.id, kind=st.kind, kind_label=label, title=st.title,
            x=r2(x), y=r2(y), width=r2(box_w), height=box_h, dash=KIND_DASH.get(st.kind, "4 2"),
            badge=Text(r2(x + 6), r2(y + 15), badge),
            title_lines=tuple(Text(r2(x + 6), r2(y + 32 + 13 * k), line)
                              for k, line in enumerate(wrap(st.title, title_chars, 3 if note is None else 2))),
            from_note=note, selected=sel,
            selected_mark=Text(r2(x), r2(y - 8), "▶ selected") if sel else None,
            ring=(r2(x - 4), r2(y - 4), r2(box_w + 8), r2(box_h + 8)) if sel else None,
            aria_label=f"Stage {i + 1}: {st.title} ({label})" + (", selected" if sel else ""),
        )
        if prev is None:
            x0 = margin + chip_w
            d, lx = f"M{r2(x0)} {r2(mid)}H{r2(x - 2)}", (x0 + x) / 2
            arrows.append(Arrow("start", st.id, d, Text(r2(lx), r2(mid - 6), "", "middle"),
                                Text(r2(lx), r2(mid + 14), "", "middle")))
        else:
            if c:  # same row: straight
                x0 = prev.x + prev.width
                d = f"M{r2(x0)} {r2(mid)}H{r2(x - 2)}"
            else:  # wrap: down from the last box, back to the left, into this row
                x0 = margin + chip_w / 2
                d = (f"M{r2(prev.x + prev.width / 2)} {r2(prev.y + box_h)}V{r2(prev.y + box_h + 14)}"
                     f"H{r2(x0)}V{r2(mid)}H{r2(x - 2)}")
            lx = (x0 + x) / 2
            arrows.append(Arrow(stages[i - 1].id, st.id, d,
                                Text(r2(lx), r2(mid - 6), prev_output, "middle"),
                                Text(r2(lx), r2(mid + 14), _handoff(prev_output, st), "middle")))
        boxes.append(box)
        prev = box
    chip_y = top + box_h / 2 - 22
    teacher = first.kind == "rejection_sampling"
    order = " → ".join(f"{b.number}. {b.title} ({b.kind_label})" for b in boxes)
    chosen = next((b for b in boxes if b.selected), None)
    summary = (f"Pipeline of {process.title}: starts from {first.start}"
               + (" (the teacher)" if teacher else "") + f"; {order}."
               + (f" Selected: stage {chosen.number}, {chosen.title}." if chosen else ""))
    caption = ("Solid thick border: GRPO (RL); dashed: SFT; dotted: rejection sampling; dash-dot: "
               "distillation SFT. Arrows carry the checkpoint or dataset named on them; "
               "“from …” marks a stage that restarts from another checkpoint.")
    return Pipeline(
        width=r2(2 * margin + chip_w + cols * (gap + box_w)), height=r2(top + rows * box_h + (rows - 1) * row_gap + 10),
        start_x=margin, start_y=r2(chip_y), start_width=chip_w, start_height=44.0,
        start_name=Text(r2(margin + chip_w / 2), r2(chip_y + 32), first.start, "middle"),
        start_role=Text(r2(margin + chip_w / 2), r2(chip_y + 15), "teacher" if teacher else "start", "middle"),
        boxes=tuple(boxes), arrows=tuple(arrows), selected=chosen.id if chosen else None,
        summary=summary, caption=caption,
    )

