"""The overview's compact layout: the whole model, every module collapsed, in layers.

Exports lay top-level nodes on one long row (the seed: ten boxes over 3,210 units), which
no screen shows whole at a readable size. The overview instead places each top-level node
in a row by its longest path from the inputs (networkx's topological generations: a
Sugiyama layering), orders each row by the mean place of its predecessors (one barycentre
sweep, which removes the seed's crossings), and centres the rows. Rows, not columns: the
seed's six layers are at most four boxes wide, so top to bottom is close to square (720 x
710 units) and fits a laptop's frame at 0.78 and a phone's at 0.5, where left to right
(1,350 x 384) gives 0.6 and 0.25. The steps keep the author's saved positions; only the
overview uses this.
"""
from __future__ import annotations

import networkx as nx

from app.domain.snapshot import Snapshot
from app.views.graph_layout import NODE_HEIGHT, NODE_WIDTH, representative

COLUMN_GAP = 40.0   # between the boxes of one layer
ROW_GAP = 70.0      # between layers: edges, arrowheads, and a note above a box (the rewards)


def top_level_graph(snapshot: Snapshot) -> nx.DiGraph:
    """Top-level nodes, with an edge wherever any member-level edge joins two of them."""
    top = [n.node_id for n in snapshot.nodes if n.parent_id is None]
    visible = set(top)
    graph = nx.DiGraph()
    graph.add_nodes_from(top)
    for edge in snapshot.edges:
        s = representative(snapshot, edge.source_node_id, visible)
        t = representative(snapshot, edge.target_node_id, visible)
        if s != t:
            graph.add_edge(s, t)
    return graph


def _layers(graph: nx.DiGraph) -> list[list[str]]:
    if nx.is_directed_acyclic_graph(graph):
        return [list(g) for g in nx.topological_generations(graph)]
    # A cycle (the format allows one) has no layering: break it by file order, the
    # least surprising choice, and lay out the remaining DAG.
    order = {n: i for i, n in enumerate(graph.nodes)}
    acyclic = nx.DiGraph()
    acyclic.add_nodes_from(graph.nodes)
    acyclic.add_edges_from((s, t) for s, t in graph.edges if order[s] < order[t])
    return [list(g) for g in nx.topological_generations(acyclic)]


def overview_positions(snapshot: Snapshot) -> dict[str, dict[str, float]]:
    """World positions (top-left corners) of every top-level node, for graph_layout.layout."""
    graph = top_level_graph(snapshot)
    file_order = {n: i for i, n in enumerate(graph.nodes)}
    layers = _layers(graph)
    place: dict[str, float] = {}   # centred index of each node within its layer
    for layer in layers:
        def barycentre(n: str) -> tuple[float, int]:
            above = [place[p] for p in graph.predecessors(n) if p in place]
            return (sum(above) / len(above) if above else float(file_order[n]), file_order[n])
        layer.sort(key=barycentre)
        for i, n in enumerate(layer):
            place[n] = i - (len(layer) - 1) / 2
    widest = max((len(layer) for layer in layers), default=0)
    pitch = NODE_WIDTH + COLUMN_GAP
    positions: dict[str, dict[str, float]] = {}
    for depth, layer in enumerate(layers):
        left = (widest - len(layer)) * pitch / 2
        for i, n in enumerate(layer):
            positions[n] = {"x": left + i * pitch, "y": depth * (NODE_HEIGHT + ROW_GAP)}
    return positions
