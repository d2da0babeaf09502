"""Graph view model: what one view draws, given its expanded modules.

The drawn nodes with boxes sized to their text, the folded edges routed by Graphviz dot
(graph_dot), and a camera framing the view's nodes (docs/design.md §2, "Graph layout").
Knows the snapshot format, nothing of the web layer.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.domain.snapshot import Node, Snapshot
from app.views.graph_camera import PHONE_ROOM, Camera, cut_by, fit_all, fit_camera, fits, with_holders
from app.views.graph_dot import LayoutCluster, LayoutNode, dot_layout
from app.views.graph_layout import (
    NODE_HEIGHT,
    NODE_WIDTH,
    DrawnEdge,
    ancestors,
    fold_edges,
    skip_edges,
    visible_node_ids,
)
from app.views.meaning import node_meaning
from app.views.numbers import coordinate as fmt

DEFAULT_VIEWPORT = (1100.0, 700.0)


LABEL_CHAR_PX = 8.0     # a 13px bold label character, with room to spare (measured in Chromium: 7.2-7.8)
MONO_CHAR_PX = 7.0      # an 11px monospace character (DejaVu Sans Mono: 6.6)
LABEL_WRAP = 220.0      # a display name longer than this breaks into two lines
TEXT_INSET = 10.0       # text starts this far inside a box, and keeps as much clear on the right
TOGGLE_ROOM = 30.0      # the ± at a module's top right
WARNING_ROW = 16.0      # a shape warning is the box's last line: inside the box, no edge crosses it
WARNING_CHAR_PX = 7.0   # an 11px semibold character
NOTE_CHAR_PX = 7.2      # a 12px annotation character
NOTE_HEIGHT = 24.0


@dataclass(frozen=True)
class LabelLine:
    text: str


def wrap_label(text: str, room: float) -> tuple[LabelLine, ...]:
    """A display name in one line if it fits `room` world units, else the two-line split with
    the shorter longer line (breaking at a space, or after a hyphen when that is better). The
    box is then sized to the longer line: nothing is squeezed or cut."""
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
    return tuple(LabelLine(line) for line in lines)


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
    lines: tuple[LabelLine, ...] = ()   # the display name as drawn (wrapped when long)
    # an open module's header (its text and ±): x, y, width, where dot put it
    header: tuple[float, float, float] | None = None
    header_height: float = 0.0

    @property
    def header_box(self) -> tuple[float, float, float, float] | None:
        """An open module's title block (name, id line, ±) as a box: what the camera keeps whole."""
        return (*self.header, self.header_height) if self.header else None

    @property
    def short_label(self) -> str:
        """The label less its module's prefix: a member sits inside its module's box."""
        prefix = f"{self.parent_id}."
        if self.parent_id and self.label.startswith(prefix) and len(self.label) > len(prefix):
            return self.label[len(prefix):]
        return self.label

    @property
    def label_lines(self) -> tuple[LabelLine, ...]:
        return self.lines

    @property
    def text_x(self) -> float:
        """Where the box's text block starts: its top left, or an open module's header."""
        return self.header[0] if self.header else self.x

    @property
    def text_y(self) -> float:
        return self.header[1] if self.header else self.y

    @property
    def text_width(self) -> float:
        """The width the text block (and the ± at its right end) is drawn in."""
        return self.header[2] if self.header else self.width

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
class DrawnNote:
    """A note that is not a node of the snapshot (the rewards beside the advantages): laid out by
    dot as a box of its own with an edge into its node, so no other edge crosses its text."""
    node_id: str              # the node it points at
    text: str
    x: float
    y: float
    width: float
    height: float
    path: str                 # the arrow from the note into its node


@dataclass(frozen=True)
class GraphView:
    nodes: list[DrawnNode]    # open containers first, outermost first: they lie behind members
    edges: list[DrawnEdge]
    camera: Camera
    viewport_width: float
    viewport_height: float
    bounds: tuple[float, float, float, float]  # min_x, min_y, max_x, max_y (world)
    fit_all: bool = False     # the overview: the browser fits every box
    framed_ids: tuple[str, ...] = ()   # what the camera must show whole (the step's own nodes)
    context_ids: tuple[str, ...] = ()  # framed plus their direct neighbours, shown when they fit
    holder_ids: tuple[str, ...] = ()   # open modules holding a framed node: framed with it when they fit
    # The step's open modules as the camera wants them, in order (the innermost holding the step's node
    # first): (id, "header") its title block, (id, "box") all of it; each joins the framed boxes while
    # all still fit the frame at a readable zoom (static/js/camera.js, graph_camera.fit_camera).
    wanted: tuple[tuple[str, str], ...] = ()
    # The step's open modules whose title cannot share a phone's frame with the step's node (a title
    # 800 units above it): (id, display name), named in the frame's title strip (partials/graph_titles.html).
    far_titles: tuple[tuple[str, str], ...] = ()
    # nodes (and "note:<node id>" notes) the camera leaves across the viewport's edge: drawn faded
    cut_ids: tuple[str, ...] = ()
    layout_key: str = ""      # changes exactly when the boxes move (another set of open modules)
    layout_seconds: float = 0.0        # what dot took for this view (0: cached)
    notes: tuple[DrawnNote, ...] = ()
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
    """Say so when the file's shape is not what the model computes; never fix it silently. An input's
    declared shape is the export's example, not the model's: its palette entry's default (the user's
    export: 1,3,224,224) or the shape the exporter traced with (the real model's 2,7), where a run feeds its own.
    That is the export's quirk, not the reader's problem, so no alarm on the node: the inspector says
    it as information (views/inspector.py shape_note)."""
    if declared is None or traced is None or node.kind == "input":
        return None
    try:
        if tuple(int(part) for part in declared.split(",")) == traced:
            return None
    except ValueError:
        pass  # a shape that is not a list of ints cannot match either
    return f"declared {declared} but traced {shape_text(traced)}"


# -- sizing ----------------------------------------------------------------------

def _text_box(display_name: str, short_label: str, shape: str, members: str | None,
              has_toggle: bool, warnings: Sequence[str] = ()) -> tuple[tuple[LabelLine, ...], float, float]:
    """(label lines, width, height) of a box that holds its text at its CSS size: the name in
    one or two 13px lines, then the id (and, for two lines, the shape) at 11px monospace, and a
    shape warning (either of its texts: short, or the declared shape when selected) as a last line."""
    lines = wrap_label(display_name, LABEL_WRAP)
    two = len(lines) > 1
    id_line = short_label + (f" · {shape}" if two and shape else "")
    # Not traced here (the page may still show a recorded shape): room for a 3-d one, "(2, 17, 32)".
    shape = shape or "(00, 00, 00)"
    detail = "" if two else shape + (" · " + members if members else "")
    text_w = max([len(line.text) * LABEL_CHAR_PX for line in lines]
                 + [len(id_line) * MONO_CHAR_PX, len(detail) * MONO_CHAR_PX]
                 + [len(w) * WARNING_CHAR_PX for w in warnings])
    width = max(float(NODE_WIDTH), float(round(text_w + 2 * TEXT_INSET + (TOGGLE_ROOM if has_toggle else 0))))
    return lines, width, float(NODE_HEIGHT) + (WARNING_ROW if warnings else 0.0)


def warning_texts(declared: str | None, warning: str | None) -> tuple[str, str] | tuple[()]:
    """What the box's warning line says: short until selected, then the declared shape (the
    title, the aria-label and the inspector say it whole). Sized for both, so selecting a node
    never moves the layout."""
    if not warning:
        return ()
    return ("⚠ file's shape differs", f"⚠ declared {declared}")


def build_graph_view(snapshot: Snapshot, expanded: Iterable[str], selected: Iterable[str], *,
                     framed: Iterable[str] = (), viewport: tuple[float, float] | None = None,
                     shapes: Mapping[str, Sequence[int]] | None = None, compact: bool = False,
                     notes: Mapping[str, str] | None = None) -> GraphView:
    """The drawn graph of one view, laid out by dot. Unknown ids in ``expanded``/``selected``/
    ``framed`` are ignored (the routes validate them); ``shapes`` (traced, per node id) feed the
    shape line and its warning; ``framed`` (default: the selection) is what the camera shows
    whole, with its direct neighbours when they fit; ``compact`` (the overview) packs the layers
    closer; ``notes`` (node id -> short text) are drawn as boxes of their own with an arrow into
    their node, laid out by dot with the rest. The export's saved positions and cameras
    belong to its author's layout, which dot replaces (docs/design.md §2, "Graph layout")."""
    expanded = list(expanded)
    visible = visible_node_ids(snapshot, expanded)
    visible_set = set(visible)
    open_ids = {m for m in expanded if m in snapshot.node_map and snapshot.node(m).is_module}
    chosen = set(selected)
    containers = {nid for nid in visible if nid in open_ids
                  and any(m in visible_set for m in snapshot.node(nid).members)}

    sized: dict[str, tuple[tuple[LabelLine, ...], float, float]] = {}
    traced_of: dict[str, tuple[int, ...] | None] = {}
    for nid in visible:
        node = snapshot.node(nid)
        traced = tuple(int(d) for d in shapes[nid]) if shapes and nid in shapes else None
        traced_of[nid] = traced
        members = len(node.members)
        short = _short_label(nid, node.parent_id)
        declared = _declared_shape(node)
        sized[nid] = _text_box(node_meaning(snapshot, nid).display_name, short, shape_text(traced),
                               (f"{members} member" + ("" if members == 1 else "s")) if node.is_module else None,
                               node.is_module and members > 0,
                               warning_texts(declared, _shape_warning(node, declared, traced)))

    folded = fold_edges(snapshot, visible_set, containers)
    layout_nodes = [LayoutNode(nid, sized[nid][1], sized[nid][2], snapshot.node(nid).parent_id)
                    for nid in visible if nid not in containers]
    clusters = [LayoutCluster(nid, snapshot.node(nid).parent_id, sized[nid][1], sized[nid][2])
                for nid in visible if nid in containers]
    pairs = [(e.source, e.target) for e in folded]
    skips = skip_edges(pairs)
    note_of = {f"note:{nid}": (nid, text) for nid, text in (notes or {}).items()
               if nid in visible_set and nid not in containers}
    for note_id, (nid, text) in note_of.items():
        layout_nodes.append(LayoutNode(note_id, float(round(len(text) * NOTE_CHAR_PX + 2 * TEXT_INSET)), NOTE_HEIGHT,
                                       snapshot.node(nid).parent_id))
    laid = dot_layout(layout_nodes, clusters, pairs + [(note_id, nid) for note_id, (nid, _) in note_of.items()],
                      compact=compact)
    drawn_notes = tuple(DrawnNote(nid, text, *laid.boxes[note_id], path=laid.paths.get((note_id, nid), ""))
                        for note_id, (nid, text) in note_of.items())

    drawn: list[DrawnNode] = []
    for nid in visible:
        node = snapshot.node(nid)
        declared = _declared_shape(node)
        x, y, w, h = laid.boxes[nid]
        drawn.append(DrawnNode(
            id=nid, kind=node.kind, op=node.op, label=nid, display_name=node_meaning(snapshot, nid).display_name,
            x=x, y=y, width=w, height=h,
            is_module=node.is_module, expanded=nid in open_ids, member_count=len(node.members),
            parent_id=node.parent_id, depth=len(ancestors(snapshot, nid)), selected=nid in chosen,
            shape=traced_of[nid], declared_shape=declared,
            shape_warning=_shape_warning(node, declared, traced_of[nid]), lines=sized[nid][0],
            header=laid.headers[nid][:3] if nid in laid.headers else None,
            header_height=laid.headers[nid][3] if nid in laid.headers else 0.0))
    # Containers behind everything, outer behind inner; otherwise file order (stable sort).
    drawn.sort(key=lambda n: (0, n.depth) if n.is_container else (1, 0))

    edges = [DrawnEdge(id=f"{e.source}->{e.target}", source=e.source, target=e.target,
                       path=laid.paths.get((e.source, e.target), ""), edge_ids=e.edge_ids,
                       skip=(e.source, e.target) in skips) for e in folded]
    bounds = ((min(n.x for n in drawn), min(n.y for n in drawn),
               max(n.x + n.width for n in drawn), max(n.y + n.height for n in drawn))
              if drawn else (0.0, 0.0, 0.0, 0.0))
    named = [n for n in dict.fromkeys([*framed, *selected]) if n in visible_set]
    # What must be whole: the selection, and the named modules drawn as boxes; a named open module
    # (a container) is wanted instead: whole where it fits, else its title (below).
    framed_ids = tuple(n for n in named if n in chosen or n not in containers)
    # neighbours of a named node, or of a member drawn inside a named (open) module
    core = set(named) | {n for n in visible if set(ancestors(snapshot, n)) & set(named)}
    context = set(core)
    for e in edges:
        if e.source in core:
            context.add(e.target)
        if e.target in core:
            context.add(e.source)
    context_ids = tuple(n for n in visible if n in context)
    vw, vh = viewport if viewport is not None else DEFAULT_VIEWPORT
    holder_ids = tuple(a for a in dict.fromkeys(a for n in framed_ids for a in ancestors(snapshot, n))
                       if a in containers and a not in framed_ids)
    # the open modules the step names: those holding its nodes (innermost first), then the others
    groups = [*holder_ids, *(n for n in named if n in containers and n not in framed_ids and n not in holder_ids)]
    wanted = tuple((g, part) for g in groups for part in ("header", "box"))
    by_id = {n.id: n for n in drawn}

    def box_of(gid: str, part: str) -> tuple[float, float, float, float]:
        header = by_id[gid].header_box
        return header if part == "header" and header else laid.boxes[gid]

    own = [laid.boxes[n] for n in framed_ids if n in chosen]
    # named outermost first, as a path: "Policy › Llama block 12 › Grouped-query attention"
    far_titles = tuple((g, _title(by_id[g])) for g in [*reversed(holder_ids), *groups[len(holder_ids):]]
                       if own and g not in chosen and not fits([*own, box_of(g, "header")], PHONE_ROOM))
    # what the frame's edge must not cut: every box but an open module's (its title block instead), and notes
    avoid = [laid.boxes[n.id] if not n.is_container else box_of(n.id, "header") for n in drawn]
    avoid += [(note.x, note.y, note.width, note.height) for note in drawn_notes]
    need = with_holders([laid.boxes[n] for n in framed_ids], [laid.boxes[n] for n in holder_ids], (vw, vh))
    camera = fit_camera(need, [laid.boxes[n] for n in context_ids], (vw, vh),
                        wanted=[box_of(g, part) for g, part in wanted], avoid=avoid)
    owners = [n.id for n in drawn] + [f"note:{note.node_id}" for note in drawn_notes]
    cut_ids = tuple(owners[i] for i in cut_by(camera, (vw, vh), avoid))
    if not framed_ids:
        camera, cut_ids = fit_all(bounds, (vw, vh)), ()
    key = hashlib.sha256(repr((sorted(containers), sorted(laid.boxes.items()))).encode()).hexdigest()[:12]
    return GraphView(nodes=drawn, edges=edges, camera=camera,
                     viewport_width=float(vw), viewport_height=float(vh), bounds=bounds,
                     framed_ids=framed_ids, context_ids=context_ids, holder_ids=holder_ids,
                     wanted=wanted if framed_ids else (), far_titles=far_titles, cut_ids=cut_ids, layout_key=key,
                     layout_seconds=laid.seconds, notes=drawn_notes)


def _title(node: DrawnNode) -> str:
    """An open module's name in the frame's title strip: its display name, and its index where its id
    ends in one ("Llama block" is one of thirty: "Llama block 12")."""
    last = node.id.rsplit(".", 1)[-1]
    name = node.display_name
    return f"{name} {last}" if last.isdigit() and not name.endswith(last) else name


def _short_label(node_id: str, parent_id: str | None) -> str:
    prefix = f"{parent_id}."
    if parent_id and node_id.startswith(prefix) and len(node_id) > len(prefix):
        return node_id[len(prefix):]
    return node_id
