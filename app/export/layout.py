"""Positions from a layered layout, and cameras that frame a step's nodes.

Each level is laid out on its own (a Sugiyama layering: networkx's topological
generations of the edges between that level's members, each layer ordered by the mean
place of its predecessors). The top level runs left to right, one column per layer, as
the app draws edges from a box's right side to the next one's left; a module's members
run top to bottom inside it, as in the seed. Member positions are relative to their
module (the format's rule). An expanded module is drawn around its members, so a step's
positions are laid out with that step's modules open and nothing overlaps.
"""
from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from app.domain.snapshot.limits import MAX_ZOOM, MIN_ZOOM
from app.export.graph import Graph

# The renderer's geometry (app/views/graph_layout.py, which this layer may not import;
# tests/export checks they agree): a box is 150 x 60 world units, an open module is
# drawn PADDING beyond its members, and its members start MEMBER_TOP below its top.
NODE_WIDTH, NODE_HEIGHT, PADDING = 150.0, 60.0, 24.0
MEMBER_TOP = NODE_HEIGHT + 10
COLUMN_GAP = 100.0  # between top-level layers: room for the edges and their arrowheads
ROW_GAP = 70.0  # between boxes of one top-level layer: room for a note above a box (the rewards), as in the overview
MEMBER_ROW_GAP = 50.0  # between a module's member layers (edges run down between them)
MEMBER_COLUMN_GAP = 30.0
STEP_ZOOM = 1.25  # the seed's cameras' zoom: a step shows its nodes close up unless they do not fit
FRAME_MARGIN = 48.0  # screen pixels kept clear around the framed nodes

Box = tuple[float, float, float, float]  # x, y, width, height (world)


def _layers(ids: list[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    rank = {n: i for i, n in enumerate(ids)}
    dag = nx.DiGraph()
    dag.add_nodes_from(ids)
    # A module-level cycle (a module used twice, around another) has no layering: the
    # backward edges, by file order, are left out.
    dag.add_edges_from((s, t) for s, t in edges if rank[s] < rank[t])
    layers: list[list[str]] = []
    place: dict[str, float] = {}
    for generation in nx.topological_generations(dag):
        def barycentre(n: str) -> tuple[float, int]:
            above = [place[p] for p in dag.predecessors(n)]
            return (sum(above) / len(above) if above else float(rank[n]), rank[n])
        layer = sorted(generation, key=barycentre)
        for i, n in enumerate(layer):
            place[n] = i - (len(layer) - 1) / 2
        layers.append(layer)
    return layers


def layout(graph: Graph, expanded: Iterable[str] = ()) -> tuple[dict[str, tuple[float, float]], dict[str, Box]]:
    """(stored positions: top level absolute, members relative; absolute boxes as drawn)."""
    open_modules = {m for m in expanded if graph.members.get(m)}
    pairs = [(e["source_node_id"], e["target_node_id"]) for e in graph.edges]
    rel: dict[str, tuple[float, float]] = {}
    size: dict[str, tuple[float, float]] = {}

    def place(group: str | None) -> None:
        ids = graph.members.get(group, [])
        for n in ids:
            if n in graph.members:
                place(n)
            size[n] = (NODE_WIDTH, NODE_HEIGHT)
            if n in open_modules:
                size[n] = (max(NODE_WIDTH, max(rel[m][0] + size[m][0] for m in graph.members[n]) + PADDING),
                           max(NODE_HEIGHT, max(rel[m][1] + size[m][1] for m in graph.members[n]) + PADDING))
        inside = set(ids)
        layers = _layers(ids, ((s, t) for s, t in pairs if s in inside and t in inside))
        across = 0 if group is None else 1  # which axis a layer's boxes share: x (top) or y (members)
        gap_between, gap_within = (COLUMN_GAP, ROW_GAP) if group is None else (MEMBER_ROW_GAP, MEMBER_COLUMN_GAP)
        # Each layer is centred on the widest one as drawn collapsed, so opening a module
        # pushes its neighbours aside without re-centring the whole picture.
        collapsed = [len(layer) * (NODE_WIDTH, NODE_HEIGHT)[1 - across] + (len(layer) - 1) * gap_within
                     for layer in layers]
        start = (0.0, 0.0) if group is None else (PADDING, MEMBER_TOP)
        along = start[across]
        for layer, extent in zip(layers, collapsed, strict=True):
            offset = start[1 - across] + (max(collapsed) - extent) / 2
            for n in layer:
                rel[n] = (along, offset) if across == 0 else (offset, along)
                offset += size[n][1 - across] + gap_within
            along += max(size[n][across] for n in layer) + gap_between

    place(None)
    boxes: dict[str, Box] = {}

    def absolute(n: str) -> Box:
        if n not in boxes:
            up = graph.parent.get(n)
            px, py = (0.0, 0.0) if up is None else absolute(up)[:2]
            boxes[n] = (px + rel[n][0], py + rel[n][1], *size[n])
        return boxes[n]

    for n in rel:
        absolute(n)
    return rel, boxes


def frame(boxes: list[Box], viewport: tuple[float, float]) -> dict[str, float]:
    """The camera (screen = world * z + (x, y)) that centres the boxes in the viewport, at the
    seed's zoom when they fit and smaller when they do not."""
    left = min(b[0] for b in boxes)
    top = min(b[1] for b in boxes)
    right = max(b[0] + b[2] for b in boxes)
    bottom = max(b[1] + b[3] for b in boxes)
    vw, vh = viewport
    z = min(STEP_ZOOM, (vw - 2 * FRAME_MARGIN) / (right - left), (vh - 2 * FRAME_MARGIN) / (bottom - top))
    z = min(max(z, MIN_ZOOM), MAX_ZOOM)
    return {"x": number(vw / 2 - (left + right) / 2 * z), "y": number(vh / 2 - (top + bottom) / 2 * z),
            "z": number(z, 4)}


def number(value: float, digits: int = 1) -> float | int:
    """Rounded so the file reads well, whole numbers as integers (the seed's `{"x": 24, "y": 214}`)."""
    value = round(float(value), digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    return int(value) if value.is_integer() else value
