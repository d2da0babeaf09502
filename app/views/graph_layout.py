"""Graph geometry: where each drawn box goes, and how the export's two-level edges fold.

Boxes are laid out in world coordinates; member positions stored in the file
are relative to their module (docs/design.md §2). Edges attach to the nearest
drawn ancestor of each end, merge, and arch over boxes they would cross.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.domain.snapshot import Snapshot
from app.views.numbers import coordinate as fmt

# World units. 150 x 60 is what the seed's cameras were framed for: with it each
# step's selected box lies inside its 1100 x 700 viewport (the reference step
# leaves 2.5 px), so a change here must keep the graph tests' camera test.
NODE_WIDTH = 150
NODE_HEIGHT = 60
PADDING = 24             # an expanded container's margin right of / below its members
GAP = 40                 # between a box with no stored position and its left neighbour
MEMBER_TOP = NODE_HEIGHT + 10   # unpositioned members start below the container's header


@dataclass(frozen=True)
class DrawnEdge:
    id: str
    source: str               # visible endpoints after folding
    target: str
    path: str                 # SVG path data
    edge_ids: tuple[str, ...]  # the snapshot edges folded into this one


# -- visibility -------------------------------------------------------------------

def ancestors(snapshot: Snapshot, node_id: str) -> list[str]:
    """Enclosing modules, innermost first (the loader has refused cycles)."""
    chain, parent = [], snapshot.node(node_id).parent_id
    while parent is not None:
        chain.append(parent)
        parent = snapshot.node(parent).parent_id
    return chain


def visible_node_ids(snapshot: Snapshot, expanded: Iterable[str]) -> list[str]:
    """Nodes drawn in a view: those whose every enclosing module is expanded, in file order."""
    open_modules = set(expanded)
    return [n.node_id for n in snapshot.nodes
            if all(a in open_modules for a in ancestors(snapshot, n.node_id))]


def representative(snapshot: Snapshot, node_id: str, visible: set[str]) -> str:
    """The drawn node that stands for ``node_id``: itself, else its nearest visible
    ancestor (which is its outermost collapsed one). Top-level nodes are always visible."""
    current = node_id
    while current not in visible:
        parent = snapshot.node(current).parent_id
        assert parent is not None, "a top-level node is always visible"
        current = parent
    return current


# -- layout -----------------------------------------------------------------------

Box = tuple[float, float, float, float]  # x, y, width, height


def _xy(pos: Any) -> tuple[float, float]:
    # A step's nodePositions holds Position models; callers may pass plain dicts.
    if isinstance(pos, Mapping):
        return float(pos["x"]), float(pos["y"])
    return float(pos.x), float(pos.y)


def layout(snapshot: Snapshot, visible: list[str], open_ids: set[str],
            positions: Mapping[str, Any] | None) -> dict[str, Box]:
    """Absolute boxes of the visible nodes; stored positions of members are relative."""
    stored = snapshot.document.view.node_positions
    children: dict[str | None, list[str]] = {}
    for nid in visible:
        children.setdefault(snapshot.node(nid).parent_id, []).append(nid)
    rel: dict[str, tuple[float, float]] = {}
    size: dict[str, tuple[float, float]] = {}

    def place(parent: str | None) -> None:
        group = children.get(parent, [])
        for nid in group:
            w, h = float(NODE_WIDTH), float(NODE_HEIGHT)
            if nid in open_ids and children.get(nid):
                place(nid)
                w = max(w, max(rel[m][0] + size[m][0] for m in children[nid]) + PADDING)
                h = max(h, max(rel[m][1] + size[m][1] for m in children[nid]) + PADDING)
            size[nid] = (w, h)
            pos = (positions or {}).get(nid)
            pos = stored.get(nid) if pos is None else pos
            if pos is not None:
                rel[nid] = _xy(pos)
        # A node the file gives no position: on a row right of its group's rightmost box,
        # in file order, so the same file always draws the same picture.
        known = [n for n in group if n in rel]
        right = max((rel[n][0] + size[n][0] for n in known), default=PADDING - GAP if parent else -GAP)
        top = min((rel[n][1] for n in known), default=MEMBER_TOP if parent else 0.0)
        for nid in group:
            if nid not in rel:
                rel[nid] = (right + GAP, top)
                right += GAP + size[nid][0]

    place(None)
    boxes: dict[str, Box] = {}

    def absolute(nid: str) -> Box:
        if nid not in boxes:
            parent = snapshot.node(nid).parent_id
            px, py = (0.0, 0.0) if parent is None else absolute(parent)[:2]
            boxes[nid] = (px + rel[nid][0], py + rel[nid][1], *size[nid])
        return boxes[nid]

    for nid in visible:
        absolute(nid)
    return boxes


# -- edges ------------------------------------------------------------------------

def _clip(a: tuple[float, float], b: tuple[float, float], box: Box) -> tuple[float, float] | None:
    """Liang-Barsky: the part [t0, t1] of segment a-b (a + t(b - a), 0 <= t <= 1) inside the
    closed ``box``, or None when they do not meet. Constant work, whatever the coordinates."""
    x, y, w, h = box
    dx, dy = b[0] - a[0], b[1] - a[1]
    t0, t1 = 0.0, 1.0
    # p * t <= q for each side: left, right, top, bottom
    for p, q in ((-dx, a[0] - x), (dx, x + w - a[0]), (-dy, a[1] - y), (dy, y + h - a[1])):
        if p == 0:
            if q < 0:  # parallel to this side and outside it
                return None
        elif p < 0:
            t0 = max(t0, q / p)
        else:
            t1 = min(t1, q / p)
        if t0 > t1:
            return None
    return t0, t1


def _crosses(a: tuple[float, float], b: tuple[float, float], boxes: Iterable[Box]) -> bool:
    """Whether the straight segment a-b runs through any of ``boxes`` between its ends (an
    end may touch a box's edge: it sits on the box the edge joins). Exact, and O(boxes):
    sampling along the segment cost time and memory in proportion to its length."""
    for box in boxes:
        part = _clip(a, b, box)
        if part is not None and part[1] > 0 and part[0] < 1:
            return True
    return False


def _edge_path(src: Box, dst: Box, obstacles: Iterable[Box]) -> str:
    """Cubic Bezier from the source's right-middle to the target's left-middle.

    Exports lay modules on one row, so an edge that skips a box would run through it
    and hide behind it; such an edge arches above, higher the longer it is, so arcs
    from one node nest instead of sharing one line.
    """
    overlaps_x = src[0] < dst[0] + dst[2] and dst[0] < src[0] + src[2]
    if overlaps_x and (dst[1] >= src[1] + src[3] or src[1] >= dst[1] + dst[3]):
        # Stacked boxes (members of one module): bottom-to-top, not a loop round the side.
        down = dst[1] >= src[1] + src[3]
        x1, y1 = src[0] + src[2] / 2, src[1] + (src[3] if down else 0)
        x2, y2 = dst[0] + dst[2] / 2, dst[1] + (0 if down else dst[3])
        bend = max(abs(y2 - y1) / 2, GAP / 2) * (1 if down else -1)
        return (f"M{fmt(x1)} {fmt(y1)} C{fmt(x1)} {fmt(y1 + bend)} "
                f"{fmt(x2)} {fmt(y2 - bend)} {fmt(x2)} {fmt(y2)}")
    x1, y1 = src[0] + src[2], src[1] + src[3] / 2
    x2, y2 = dst[0], dst[1] + dst[3] / 2
    bend = max(abs(x2 - x1) / 2, GAP)
    lift = min(GAP + abs(x2 - x1) * 0.12, 6 * GAP) if _crosses((x1, y1), (x2, y2), obstacles) else 0
    return (f"M{fmt(x1)} {fmt(y1)} C{fmt(x1 + bend)} {fmt(y1 - lift)} "
            f"{fmt(x2 - bend)} {fmt(y2 - lift)} {fmt(x2)} {fmt(y2)}")


def _downward_path(src: Box, dst: Box) -> str:
    """Top-to-bottom layers (the overview): bottom-middle of the source to top-middle of the
    target, leaving and arriving vertically, so edges read as flowing down the layers."""
    x1, y1 = src[0] + src[2] / 2, src[1] + src[3]
    x2, y2 = dst[0] + dst[2] / 2, dst[1]
    bend = max(abs(y2 - y1) / 2, GAP)
    return (f"M{fmt(x1)} {fmt(y1)} C{fmt(x1)} {fmt(y1 + bend)} "
            f"{fmt(x2)} {fmt(y2 - bend)} {fmt(x2)} {fmt(y2)}")


def fold_edges(snapshot: Snapshot, visible: set[str], containers: set[str],
                boxes: dict[str, Box], downward: bool = False) -> list[DrawnEdge]:
    enclosing = {nid: set(ancestors(snapshot, nid)) for nid in visible}
    folded: dict[tuple[str, str], list[str]] = {}  # insertion order = first snapshot edge
    for edge in snapshot.edges:
        s = representative(snapshot, edge.source_node_id, visible)
        t = representative(snapshot, edge.target_node_id, visible)
        # Same box: the edge lives inside one collapsed module. Enclosing: a module
        # wired to its own member, which the open container already shows.
        if s == t or s in enclosing[t] or t in enclosing[s]:
            continue
        folded.setdefault((s, t), []).append(edge.edge_id)

    def within(inner: str, outer: str) -> bool:
        return inner == outer or outer in enclosing[inner]

    # Module-level edges summarise member-level ones. Once a module is open, its
    # summary edge is redundant when a more specific edge (each end the same node
    # or inside it) is drawn; an open module with no such edge keeps its summary.
    def is_summary(key: tuple[str, str]) -> bool:
        s, t = key
        if s not in containers and t not in containers:
            return False
        return any(other != key and within(other[0], s) and within(other[1], t)
                   for other in folded)

    def path(s: str, t: str) -> str:
        ends = {s, t} | enclosing[s] | enclosing[t]  # a container may hold an end
        obstacles = [box for nid, box in boxes.items() if nid not in ends]
        if downward and boxes[t][1] >= boxes[s][1] + boxes[s][3]:
            return _downward_path(boxes[s], boxes[t])
        return _edge_path(boxes[s], boxes[t], obstacles)

    return [DrawnEdge(id=f"{s}->{t}", source=s, target=t, path=path(s, t), edge_ids=tuple(ids))
            for (s, t), ids in folded.items() if not is_summary((s, t))]

