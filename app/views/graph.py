"""Graph view model: what one view draws, given its expanded modules.

The drawn nodes with their boxes, the folded edges and the step's camera
(docs/design.md §2); geometry is in graph_layout. Knows the snapshot format,
nothing of the web layer.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.snapshot import Node, Snapshot
from app.views.graph_layout import PADDING, DrawnEdge, ancestors, fold_edges, layout, visible_node_ids
from app.views.meaning import node_meaning
from app.views.numbers import coordinate as fmt

DEFAULT_VIEWPORT = (1100.0, 700.0)


LABEL_CHAR_PX = 7.6     # a 13px bold label character, on average (measured in Chromium: 7.2-7.8)


@dataclass(frozen=True)
class LabelLine:
    text: str
    squeeze: float | None     # textLength to fit the box, where the line would overrun it


def wrap_label(text: str, room: float) -> tuple[LabelLine, ...]:
    """A display name in one line if it fits `room` world units, else the two-line split with
    the shorter longer line (breaking at a space, or after a hyphen when that is better); a
    line that still overruns is squeezed (textLength) rather than cut."""
    text = " ".join(text.split())
    per_line = max(1, int(room // LABEL_CHAR_PX))
    if len(text) <= per_line:
        lines = [text]
    else:
        breaks = [(i, i + 1) for i, ch in enumerate(text) if ch == " "]
        breaks += [(i + 1, i + 1) for i, ch in enumerate(text[:-1]) if ch == "-" and i > 0]
        if breaks:
            # a hyphen break costs half a character: a space reads better at equal length
            end, start = min(breaks, key=lambda b: max(b[0], len(text) - b[1]) + (0.5 if b[0] == b[1] else 0))
            lines = [text[:end], text[start:]]
        else:
            lines = [text]
    return tuple(LabelLine(line, room if len(line) * LABEL_CHAR_PX > room else None) for line in lines)


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
    display_name: str         # what a learner reads (views/meaning.py); the id stays in title and inspector
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
    def label_room(self) -> float:
        """Width for text inside the box: less the ± where there is one."""
        return self.width - (44 if self.has_toggle else 20)

    @property
    def label_lines(self) -> tuple[LabelLine, ...]:
        return wrap_label(self.display_name, self.label_room)

    @property
    def id_squeeze(self) -> float | None:
        """The raw id line (11px monospace, about 6.7 px a character) squeezed to the room."""
        return self.label_room if len(self.short_label) * 6.7 > self.label_room else None

    @property
    def has_toggle(self) -> bool:
        """Only a module with members can open: an empty one's ± would do nothing."""
        return self.is_module and self.member_count > 0

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
    fit_all: bool = False     # the overview: the browser fits every box, not the saved camera
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
                     shapes: Mapping[str, Sequence[int]] | None = None,
                     downward_edges: bool = False) -> GraphView:
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
            id=nid, kind=node.kind, op=node.op, label=nid, display_name=node_meaning(snapshot, nid).display_name,
            x=x, y=y, width=w, height=h,
            is_module=node.is_module, expanded=nid in open_ids, member_count=len(node.members),
            parent_id=node.parent_id, depth=len(ancestors(snapshot, nid)), selected=nid in chosen,
            shape=traced, declared_shape=declared,
            shape_warning=_shape_warning(node, declared, traced)))
    # Containers behind everything, outer behind inner; otherwise file order (stable sort).
    drawn.sort(key=lambda n: (0, n.depth) if n.is_container else (1, 0))

    containers = {n.id for n in drawn if n.is_container}
    edges = fold_edges(snapshot, visible_set, containers, boxes, downward=downward_edges)
    bounds = ((min(n.x for n in drawn), min(n.y for n in drawn),
               max(n.x + n.width for n in drawn), max(n.y + n.height for n in drawn))
              if drawn else (0.0, 0.0, 0.0, 0.0))
    vw, vh = viewport if viewport is not None else DEFAULT_VIEWPORT
    return GraphView(nodes=drawn, edges=edges, camera=_camera(camera, bounds, (vw, vh)),
                     viewport_width=float(vw), viewport_height=float(vh), bounds=bounds)
