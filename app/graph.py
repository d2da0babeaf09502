"""Graph view model: what one view draws, given its expanded modules.

Lays boxes out in world coordinates, folds the export's two-level edges
(DESIGN.md §2) and carries the step's camera. Knows the snapshot format,
nothing of the web layer.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .snapshot import Node, Snapshot

# World units. 150 x 60 is what the seed's cameras were framed for: with it each
# step's selected box lies inside its 1100 x 700 viewport (the reference step
# leaves 2.5 px), so a change here must keep tests/test_graph.py's camera test.
NODE_WIDTH = 150
NODE_HEIGHT = 60
PADDING = 24             # an expanded container's margin right of / below its members
GAP = 40                 # between a box with no stored position and its left neighbour
MEMBER_TOP = NODE_HEIGHT + 10   # unpositioned members start below the container's header
DEFAULT_VIEWPORT = (1100.0, 700.0)


def fmt(value: float) -> str:
    """A number for SVG/HTML attributes: 308.5, 6, 1.25, -1770 (never '6.0' or '-0')."""
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def shape_text(shape: Sequence[int] | None) -> str:
    """'(1, 4)': the traced shape as Python prints it."""
    return "" if shape is None else str(tuple(int(d) for d in shape))


# -- view model -------------------------------------------------------------------

@dataclass(frozen=True)
class DrawnNode:
    id: str
    kind: str
    op: str
    label: str                # the node id: ids are the names people know (policy.logits)
    x: float                  # absolute world box
    y: float
    width: float
    height: float
    is_module: bool
    expanded: bool
    member_count: int
    parent_id: str | None
    depth: int                # 0 = top level
    selected: bool
    shape: tuple[int, ...] | None
    declared_shape: str | None
    shape_warning: str | None

    @property
    def short_label(self) -> str:
        """The label less its module's prefix: a member sits inside its module's box."""
        prefix = f"{self.parent_id}."
        if self.parent_id and self.label.startswith(prefix) and len(self.label) > len(prefix):
            return self.label[len(prefix):]
        return self.label

    @property
    def is_container(self) -> bool:
        """An open module drawn around its members (an empty one stays box-sized)."""
        return self.expanded and self.member_count > 0

    @property
    def shape_text(self) -> str:
        return shape_text(self.shape)


@dataclass(frozen=True)
class DrawnEdge:
    id: str
    source: str               # visible endpoints after folding
    target: str
    path: str                 # SVG path data
    edge_ids: tuple[str, ...]  # the snapshot edges folded into this one


@dataclass(frozen=True)
class Camera:
    """screen = world * z + (x, y), as the export's React-Flow-style cameras."""
    x: float
    y: float
    z: float

    def transform(self) -> str:
        return f"translate({fmt(self.x)} {fmt(self.y)}) scale({fmt(self.z)})"

    def to_screen(self, x: float, y: float) -> tuple[float, float]:
        return x * self.z + self.x, y * self.z + self.y


@dataclass(frozen=True)
class GraphView:
    nodes: list[DrawnNode]    # open containers first, outermost first: they lie behind members
    edges: list[DrawnEdge]
    camera: Camera
    viewport_width: float
    viewport_height: float
    bounds: tuple[float, float, float, float]  # min_x, min_y, max_x, max_y (world)
    _index: dict[str, DrawnNode] = field(init=False, repr=False, compare=False)

    # Templates receive only the view; these keep number formatting in one place.
    fmt = staticmethod(fmt)
    shape_text = staticmethod(shape_text)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {n.id: n for n in self.nodes})

    def node(self, node_id: str) -> DrawnNode:
        return self._index[node_id]

    @property
    def node_ids(self) -> list[str]:
        return [n.id for n in self.nodes]


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
        current = snapshot.node(current).parent_id
    return current


# -- layout -----------------------------------------------------------------------

Box = tuple[float, float, float, float]  # x, y, width, height


def _xy(pos: Any) -> tuple[float, float]:
    # A step's nodePositions holds Position models; callers may pass plain dicts.
    if isinstance(pos, Mapping):
        return float(pos["x"]), float(pos["y"])
    return float(pos.x), float(pos.y)


def _layout(snapshot: Snapshot, visible: list[str], open_ids: set[str],
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
            w, h = NODE_WIDTH, NODE_HEIGHT
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

def _crosses(a: tuple[float, float], b: tuple[float, float], boxes: Iterable[Box]) -> bool:
    """Whether the straight segment a-b runs through any of ``boxes``, sampled every
    ~20 units (well under a box's 60-unit height)."""
    lo_x, hi_x, lo_y, hi_y = min(a[0], b[0]), max(a[0], b[0]), min(a[1], b[1]), max(a[1], b[1])
    near = [(x, y, w, h) for x, y, w, h in boxes
            if x <= hi_x and lo_x <= x + w and y <= hi_y and lo_y <= y + h]
    if not near:
        return False
    n = max(8, int(max(hi_x - lo_x, hi_y - lo_y) / 20))
    points = [(a[0] + (b[0] - a[0]) * i / n, a[1] + (b[1] - a[1]) * i / n) for i in range(1, n)]
    return any(x <= px <= x + w and y <= py <= y + h for x, y, w, h in near for px, py in points)


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


def _fold_edges(snapshot: Snapshot, visible: set[str], containers: set[str],
                boxes: dict[str, Box]) -> list[DrawnEdge]:
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
        return _edge_path(boxes[s], boxes[t], obstacles)

    return [DrawnEdge(id=f"{s}->{t}", source=s, target=t, path=path(s, t), edge_ids=tuple(ids))
            for (s, t), ids in folded.items() if not is_summary((s, t))]


# -- shapes -----------------------------------------------------------------------

def _declared_shape(node: Node) -> str | None:
    value = node.params.get("shape")
    return value if isinstance(value, str) else None


def _shape_warning(node: Node, declared: str | None, traced: tuple[int, ...] | None) -> str | None:
    """Say so when the file's shape is not what the model computes; never fix it silently."""
    if declared is None or traced is None:
        return None
    try:
        if tuple(int(part) for part in declared.split(",")) == traced:
            return None
    except ValueError:
        pass  # a shape that is not a list of ints cannot match either
    text = f"declared {declared} but traced {shape_text(traced)}"
    palette = node.metadata.layer_type
    defaults = [p.get("defaultValue") for p in (palette.parameters if palette else [])
                if p.get("name") == "shape"]
    if declared in defaults:
        text += ": the file's value is the palette default"
    return text


# -- building ---------------------------------------------------------------------

def _camera(camera: Any, bounds: tuple[float, float, float, float],
            viewport: tuple[float, float]) -> Camera:
    if isinstance(camera, Camera):
        return camera
    if camera is not None:  # the snapshot's Camera model, or anything with x, y, z
        return Camera(float(camera.x), float(camera.y), float(camera.z))
    # No camera: fit every box in the viewport, centred, never enlarged past 1:1.
    min_x, min_y, max_x, max_y = bounds
    vw, vh = viewport
    w, h = max(max_x - min_x, 1.0), max(max_y - min_y, 1.0)
    z = min(1.0, (vw - 2 * PADDING) / w, (vh - 2 * PADDING) / h)
    z = z if z > 0 else 1.0
    return Camera((vw - w * z) / 2 - min_x * z, (vh - h * z) / 2 - min_y * z, z)


def build_graph_view(snapshot: Snapshot, expanded: Iterable[str], selected: Iterable[str], *,
                     camera: Any = None, viewport: tuple[float, float] | None = None,
                     positions: Mapping[str, Any] | None = None,
                     shapes: Mapping[str, Sequence[int]] | None = None) -> GraphView:
    """The drawn graph of one view. Unknown ids in ``expanded``/``selected`` are ignored
    (the routes validate them); ``positions`` (a step's nodePositions) win over the
    document's; ``shapes`` (traced, per node id) feed the shape line and its warning."""
    expanded = list(expanded)
    visible = visible_node_ids(snapshot, expanded)
    visible_set = set(visible)
    open_ids = {m for m in expanded if m in snapshot.node_map and snapshot.node(m).is_module}
    chosen = set(selected)
    boxes = _layout(snapshot, visible, open_ids, positions)

    drawn: list[DrawnNode] = []
    for nid in visible:
        node = snapshot.node(nid)
        traced = tuple(int(d) for d in shapes[nid]) if shapes and nid in shapes else None
        declared = _declared_shape(node)
        x, y, w, h = boxes[nid]
        drawn.append(DrawnNode(
            id=nid, kind=node.kind, op=node.op, label=nid, x=x, y=y, width=w, height=h,
            is_module=node.is_module, expanded=nid in open_ids, member_count=len(node.members),
            parent_id=node.parent_id, depth=len(ancestors(snapshot, nid)), selected=nid in chosen,
            shape=traced, declared_shape=declared,
            shape_warning=_shape_warning(node, declared, traced)))
    # Containers behind everything, outer behind inner; otherwise file order (stable sort).
    drawn.sort(key=lambda n: (0, n.depth) if n.is_container else (1, 0))

    containers = {n.id for n in drawn if n.is_container}
    edges = _fold_edges(snapshot, visible_set, containers, boxes)
    bounds = ((min(n.x for n in drawn), min(n.y for n in drawn),
               max(n.x + n.width for n in drawn), max(n.y + n.height for n in drawn))
              if drawn else (0.0, 0.0, 0.0, 0.0))
    vw, vh = viewport if viewport is not None else DEFAULT_VIEWPORT
    return GraphView(nodes=drawn, edges=edges, camera=_camera(camera, bounds, (vw, vh)),
                     viewport_width=float(vw), viewport_height=float(vh), bounds=bounds)
