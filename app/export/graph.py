"""A trace as the format's `document.semantic`: ordered nodes, module groups, two-level edges.

Order, as in the user's export: top-level nodes first (the input, the root's submodules in
the order they are declared, its torch calls in call order, the output), then each module's
members grouped by module, level by level. Edges exist at every level of nesting: each data
flow between two leaf nodes (`input -> policy.logits`) is followed by the same flow seen
from each enclosing level (`input -> policy`), unless both ends fall in one module there.
Edges are grouped by the top-level node they enter, internal flows of a module first,
then in the order the target read its inputs; that reproduces the seed's `edge-1` ... `edge-26`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from app.engine.runtime.trace import INPUT_ID, OUTPUT_ID, Trace, TracedNode
from app.export import palette


@dataclass(frozen=True)
class Graph:
    nodes: list[dict[str, Any]]  # the format's node objects, in file order
    edges: list[dict[str, Any]]
    parent: dict[str, str | None]  # node id -> enclosing module (None at the top level)
    members: dict[str | None, list[str]]  # module id (None: the top level) -> its members, in file order
    modules: list[str]  # group nodes, in file order


def _members(trace: Trace, declared: dict[nn.Module, int]) -> dict[str | None, list[str]]:
    """Each level's members: submodules in declaration order, then other nodes as first seen."""
    found: dict[str | None, list[TracedNode]] = {}
    for node in trace.nodes.values():
        if node.node_id not in (INPUT_ID, OUTPUT_ID):
            found.setdefault(node.parent, []).append(node)
    ordered: dict[str | None, list[str]] = {}
    for parent, nodes in found.items():
        subs = sorted((n for n in nodes if n.module is not None), key=lambda n: declared[n.module])  # type: ignore[index]
        ordered[parent] = [n.node_id for n in subs] + [n.node_id for n in nodes if n.module is None]
    ordered[None] = [INPUT_ID] + ordered.get(None, []) + [OUTPUT_ID]
    return ordered


def _chain(parent: dict[str, str | None], node_id: str) -> list[str]:
    """[outermost enclosing module, ..., node_id]."""
    chain = [node_id]
    while (up := parent[chain[0]]) is not None:
        chain.insert(0, up)
    return chain


def _levels(parent: dict[str, str | None], source: str, target: str) -> list[tuple[str, str]]:
    """The flow at each level, innermost (the leaves themselves) first."""
    a, b = _chain(parent, source), _chain(parent, target)
    pairs: list[tuple[str, str]] = []
    for depth in range(max(len(a), len(b)) - 1, -1, -1):
        pair = (a[min(depth, len(a) - 1)], b[min(depth, len(b) - 1)])
        if pair[0] != pair[1] and pair not in pairs:
            pairs.append(pair)
    return pairs


def _node(trace: Trace, node: TracedNode, members: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    meta: dict[str, Any]
    if node.kind == "input":
        meta = {"layerType": palette.INPUT}
        if node.shape is not None:  # the traced shape, not the palette's 1,3,224,224 (the seed's value)
            params["shape"] = ",".join(str(d) for d in node.shape)
    elif node.kind == "output":
        meta = {"layerType": palette.OUTPUT}
    elif node.kind == "module":
        assert node.module is not None and members is not None
        # a module may state its own sizes (`graph_params()`), so a graph says what it is made of
        stated = getattr(node.module, "graph_params", None)
        params = dict(stated()) if callable(stated) else {}
        meta = {"layerType": palette.MODULE, "moduleInstanceId": node.node_id,
                "moduleTemplateId": f"model::{type(node.module).__name__}", "isGroup": True,
                "moduleMembers": members, "moduleLayerCount": len(members)}
    elif node.op == "Python":
        meta = {"layerType": palette.PYTHON}
    elif node.module is not None:
        meta = {"layerType": palette.layer_entry(node.module)}
        params = palette.layer_params(node.module, meta["layerType"])
    else:
        meta = {"layerType": palette.torch_function(node.op)}
    if node.parent is not None:
        meta["parentId"] = node.parent
    return {"node_id": node.node_id, "kind": node.kind, "op": node.op, "params": params,
            "in_ports": [] if node.kind == "input" else ["x"], "out_ports": [] if node.kind == "output" else ["y"],
            "metadata": meta}


def build_graph(trace: Trace, model: nn.Module) -> Graph:
    declared = {m: i for i, (_, m) in enumerate(model.named_modules())}
    members = _members(trace, declared)
    parent = {n.node_id: n.parent for n in trace.nodes.values()}
    order: list[str] = []
    level: list[str | None] = [None]
    while level:  # breadth first: the top level, then every module's members, then theirs
        ids = [m for group in level for m in members.get(group, [])]
        order.extend(ids)
        level = [i for i in ids if trace.nodes[i].kind == "module"]
    modules = [i for i in order if trace.nodes[i].kind == "module"]
    nodes = [_node(trace, trace.nodes[i], members.get(i, []) if i in modules else None) for i in order]

    top_rank = {node_id: i for i, node_id in enumerate(members[None])}

    def entered(flow: tuple[str, str]) -> int:
        return top_rank[_chain(parent, flow[1])[0]]

    internal = [f for f in trace.flows if _chain(parent, f[0])[0] == _chain(parent, f[1])[0]]
    crossing = [f for f in trace.flows if f not in internal]
    pairs: dict[tuple[str, str], None] = {}  # an ordered set
    for flow in sorted(internal, key=entered) + sorted(crossing, key=entered):  # stable: observed order kept
        pairs.update(dict.fromkeys(_levels(parent, *flow)))
    edges = [{"edge_id": f"edge-{i}", "source_node_id": s, "target_node_id": t, "source_port": "y",
              "target_port": "x", "metadata": {}} for i, (s, t) in enumerate(pairs, start=1)]
    return Graph(nodes=nodes, edges=edges, parent=parent,
                 members={k: v for k, v in members.items() if k is None or k in modules}, modules=modules)
