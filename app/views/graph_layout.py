"""Graph structure: which nodes a view draws, and how the export's two-level edges fold.

Where the boxes go and how edges are routed is Graphviz dot's (app/views/graph_dot.py);
this module says what is drawn: the visible nodes (every enclosing module open), and
the folded edges (docs/design.md §2), each end attached to its nearest drawn ancestor,
merged, module-level summaries dropped where a member-level edge says more. It also
holds the exact segment-box test (Liang-Barsky) the edge checks use.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.domain.snapshot import Snapshot

# World units (one a CSS pixel at zoom 1): the smallest box; a box grows to hold its text.
NODE_WIDTH = 150
NODE_HEIGHT = 60
PADDING = 24             # margin kept around a fitted camera's boxes (world units)


@dataclass(frozen=True)
class FoldedEdge:
    source: str               # visible endpoints after folding
    target: str
    edge_ids: tuple[str, ...]  # the snapshot edges folded into this one


@dataclass(frozen=True)
class DrawnEdge:
    id: str
    source: str               # visible endpoints after folding
    target: str
    path: str                 # SVG path data
    edge_ids: tuple[str, ...]  # the snapshot edges folded into this one
    skip: bool = False        # a shortcut: a longer drawn path joins the same ends (a residual)


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


Box = tuple[float, float, float, float]  # x, y, width, height


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


def fold_edges(snapshot: Snapshot, visible: set[str], containers: set[str]) -> list[FoldedEdge]:
    """The edges one view draws (docs/design.md §2, rules 1-4), in first-snapshot-edge order."""
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

    return [FoldedEdge(s, t, tuple(ids)) for (s, t), ids in folded.items() if not is_summary((s, t))]


# -- checking routed edges -----------------------------------------------------------

def _bezier_points(path: str, per_curve: int = 16) -> list[tuple[float, float]]:
    """Points along our path data (M, L and C commands with absolute coordinates)."""
    tokens = path.replace("M", " M ").replace("L", " L ").replace("C", " C ").split()
    pts: list[tuple[float, float]] = []
    i, cur = 0, (0.0, 0.0)
    while i < len(tokens):
        cmd = tokens[i]
        if cmd in ("M", "L"):
            nxt = (float(tokens[i + 1]), float(tokens[i + 2]))
            if cmd == "L":
                pts.extend((cur[0] + (nxt[0] - cur[0]) * k / 4, cur[1] + (nxt[1] - cur[1]) * k / 4)
                           for k in range(1, 5))
            else:
                pts.append(nxt)
            cur, i = nxt, i + 3
        elif cmd == "C":
            c = [float(v) for v in tokens[i + 1:i + 7]]
            p0, p1, p2, p3 = cur, (c[0], c[1]), (c[2], c[3]), (c[4], c[5])
            for k in range(1, per_curve + 1):
                t = k / per_curve
                u = 1 - t
                pts.append((u ** 3 * p0[0] + 3 * u * u * t * p1[0] + 3 * u * t * t * p2[0] + t ** 3 * p3[0],
                            u ** 3 * p0[1] + 3 * u * u * t * p1[1] + 3 * u * t * t * p2[1] + t ** 3 * p3[1]))
            cur, i = p3, i + 7
        else:
            i += 1
    return pts


def edge_box_crossings(snapshot: Snapshot, edges: Iterable[DrawnEdge], boxes: dict[str, Box],
                       inset: float = 2.0) -> list[tuple[str, str]]:
    """(edge id, node id) for each edge that runs through a box that is neither one of its
    ends nor a module holding an end: the polyline through points along the path, tested
    exactly against each box shrunk by ``inset`` (an edge may graze a border)."""
    found = []
    for edge in edges:
        ends = {edge.source, edge.target, *ancestors(snapshot, edge.source), *ancestors(snapshot, edge.target)}
        pts = _bezier_points(edge.path)
        for nid, (x, y, w, h) in boxes.items():
            if nid in ends or w <= 2 * inset or h <= 2 * inset:
                continue
            inner = (x + inset, y + inset, w - 2 * inset, h - 2 * inset)
            if _crosses_polyline(pts, inner):
                found.append((edge.id, nid))
    return found


def crosses_any(edges: Iterable[DrawnEdge], box: Box) -> bool:
    """Whether any of the edges runs through the box: where a label that is not a box may go."""
    return any(_crosses_polyline(_bezier_points(e.path), box) for e in edges if e.path)


def _crosses_polyline(pts: list[tuple[float, float]], box: Box) -> bool:
    for a, b in zip(pts, pts[1:], strict=False):
        if _clip(a, b, box) is not None:
            return True
    return False


def skip_edges(pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Edges whose ends another drawn path also joins (s -> ... -> t, two edges or more): the
    residual stream past a transformer block. Drawn dashed and lighter, so the main chain reads first
    (giving them less weight in dot bent them through the blocks they skip)."""
    out: dict[str, list[str]] = {}
    for s, t in pairs:
        out.setdefault(s, []).append(t)
    found = set()
    for s, t in pairs:
        seen, stack = {s}, [n for n in out.get(s, []) if n != t]
        while stack:
            n = stack.pop()
            if n == t:
                found.add((s, t))
                break
            if n not in seen:
                seen.add(n)
                stack.extend(out.get(n, []))
    return found
