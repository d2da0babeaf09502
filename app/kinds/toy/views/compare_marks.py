"""Compare mode's marker on the graph: how much each node's gradient changes from A to B.

Not colour alone: a bar above the node whose filled length grows with
min(‖∇a − ∇b‖ / ‖∇a‖, 1), and a text tag ("∇ 42%", "∇ new" where A has no gradient and B
has one). Geometry is computed here, in the graph's world units; the template only draws.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.kinds.toy.engine.compare import GradChange
from app.views import numbers
from app.views.graph import GraphView

TAG_GAP = 7          # the tag's baseline above the box
BAR_HEIGHT = 9
BAR_WIDTH = 60       # at the box's right end: the middle stays clear for edges that enter from above


@dataclass(frozen=True)
class GradMark:
    node_id: str
    kind: str            # "new", "changed" or "same"
    fraction: float      # min(relative, 1); 1 for "new"
    tag: str             # "∇ 42%"
    detail: str          # the sentence, for the title and screen readers
    text_x: float
    text_y: float
    bar_x: float
    bar_y: float
    bar_width: float
    fill_width: float
    bar_height: float = BAR_HEIGHT


def percent(relative: float) -> str:
    if relative == 0:
        return "0%"
    if relative < 0.001:
        return "<0.1%"
    return numbers.significant(relative * 100, 2, strip=True) + "%"


def change_kind(change: GradChange) -> str:
    if change.relative is None:
        return "new"
    return "same" if change.relative == 0 else "changed"


def change_tag(change: GradChange) -> str:
    return "∇ new" if change.relative is None else f"∇ {percent(change.relative)}"


def change_detail(change: GradChange) -> str:
    """One sentence with the norms: what the tag's number is."""
    r = numbers.readout
    norms = f"‖∇a‖ = {r(change.norm_a)}, ‖∇b‖ = {r(change.norm_b)}, ‖∇a − ∇b‖ = {r(change.diff)}"
    if change.relative is None:
        return f"A sends no gradient here but B does, so the change has no finite size ({norms})."
    if change.relative == 0:
        return f"The gradient is the same in A and B ({norms})."
    gone = " B sends no gradient here." if change.norm_b == 0 else ""
    return f"The gradient changes by ‖∇a − ∇b‖ / ‖∇a‖ = {percent(change.relative)} from A to B ({norms}).{gone}"


def grad_marks(graph: GraphView, changes: Mapping[str, GradChange | None]) -> dict[str, GradMark]:
    """A marker for every drawn node with a gradient on either side; none where neither has one."""
    marks = {}
    for n in graph.nodes:
        change = changes.get(n.id)
        if change is None:
            continue
        fraction = 1.0 if change.relative is None else min(change.relative, 1.0)
        bar_w = min(BAR_WIDTH, n.width / 2)
        bar_x = n.x + n.width - bar_w
        marks[n.id] = GradMark(
            n.id, change_kind(change), fraction, change_tag(change), change_detail(change),
            text_x=n.x + 2, text_y=n.y - TAG_GAP, bar_x=bar_x, bar_y=n.y - TAG_GAP - BAR_HEIGHT + 1,
            bar_width=bar_w, fill_width=bar_w * fraction)
    return marks
