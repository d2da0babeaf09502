"""Compare mode's marker on the graph: how much each node's gradient changes from A to B.

Not colour alone: a bar beside the node's tag whose filled length grows with
min(‖∇a − ∇b‖ / ‖∇a‖, 1), and a text tag ("∇ 42%", "∇ new" where A has no gradient and B
has one). Geometry is computed here, in the graph's world units; the template only draws.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.kinds.toy.engine.compare import GradChange
from app.views import numbers
from app.views.graph import DrawnNode, GraphView
from app.views.graph_layout import crosses_any

TAG_GAP = 7          # the tag's baseline above the box (below it: 14 under its bottom)
BAR_HEIGHT = 9
BAR_WIDTH = 40       # after the tag
TAG_CHAR_PX = 7.5    # a 12px bold character
TEXT_HEIGHT = 12

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


Rect = tuple[float, float, float, float]


def _place(n: DrawnNode, tag: str, graph: GraphView, taken: list[Rect]) -> tuple[float, float]:
    """(x, baseline) of a node's tag and bar, one row: above the box at its left or right end, else
    below it, where no edge runs and nothing else is drawn; the first of those when none is free."""
    width = len(tag) * TAG_CHAR_PX + 6 + BAR_WIDTH
    others = [(m.x, m.y, m.width, m.height) for m in graph.nodes if not m.is_container and m.id != n.id]
    others += [(note.x, note.y, note.width, note.height) for note in graph.notes]
    spots = [(x, y) for y in (n.y - TAG_GAP, n.y + n.height + 14)
             for x in (n.x + 2, n.x + n.width - width - 2)]
    for x, y in spots:
        row = (x, y - TEXT_HEIGHT + 1, width, TEXT_HEIGHT + 1)
        if not crosses_any(graph.edges, row) and not any(_overlap(row, b) for b in [*others, *taken]):
            taken.append(row)
            return x, y
    return spots[0]


def _overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def grad_marks(graph: GraphView, changes: Mapping[str, GradChange | None]) -> dict[str, GradMark]:
    """A marker for every drawn node with a gradient on either side; none where neither has one.
    It goes where no edge crosses it (tests/browser/test_graph_readable.py)."""
    marks = {}
    taken: list[Rect] = []
    for n in graph.nodes:
        change = changes.get(n.id)
        if change is None:
            continue
        fraction = 1.0 if change.relative is None else min(change.relative, 1.0)
        tag = change_tag(change)
        x, y = _place(n, tag, graph, taken)
        bar_x = x + len(tag) * TAG_CHAR_PX + 6
        marks[n.id] = GradMark(
            n.id, change_kind(change), fraction, tag, change_detail(change),
            text_x=x, text_y=y, bar_x=bar_x, bar_y=y - BAR_HEIGHT + 1,
            bar_width=BAR_WIDTH, fill_width=BAR_WIDTH * fraction)
    return marks
