"""Graph view model: what one view draws, given its expanded modules.

The drawn nodes with their boxes, the folded edges and the step's camera
(docs/design.md §2); geometry is in graph_layout. Knows the snapshot format,
nothing of the web layer.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.snapshot import Node, Snapshot
from .graph_layout import PADDING, DrawnEdge, ancestors, fold_edges, layout, visible_node_ids
from .numbers import coordinate as fmt

DEFAULT_VIEWPORT = (1100.0, 700.0)


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
class Camera:
    """screen = world * z + (x, y), as the export's React-Flow-style cameras."""
    x: float
    y: float
    z: float

    def transform(self) -> str:
        return f"translate({fmt(self.x)} {fmt(self.y)}) scale({fmt(self.z)})"



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
    boxes = layout(snapshot, visible, open_ids, positions)

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
    edges = fold_edges(snapshot, visible_set, containers, boxes)
    bounds = ((min(n.x for n in drawn), min(n.y for n in drawn),
               max(n.x + n.width for n in drawn), max(n.y + n.height for n in drawn))
              if drawn else (0.0, 0.0, 0.0, 0.0))
    vw, vh = viewport if viewport is not None else DEFAULT_VIEWPORT
    return GraphView(nodes=drawn, edges=edges, camera=_camera(camera, bounds, (vw, vh)),
                     viewport_width=float(vw), viewport_height=float(vh), bounds=bounds)
