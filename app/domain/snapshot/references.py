"""Cross-reference checks: every dangling or contradictory id in a snapshot.

Run by parse_snapshot (parsing.py) once the Snapshot model has parsed the fields; each problem carries the JSON path
of the field that names the bad id. Not a validator of the model: the model knows nothing of this module, so the
two never import each other.
"""
from __future__ import annotations

from app.domain.snapshot.models import Node, Snapshot


def cross_reference_problems(snap: Snapshot) -> list[tuple[str, str]]:
    """Every dangling or contradictory id, as (JSON path, message), file order."""
    out: list[tuple[str, str]] = []
    sem = "document.semantic"
    by_id: dict[str, Node] = {}
    index: dict[str, int] = {}
    for i, node in enumerate(snap.document.semantic.nodes):
        if node.node_id in by_id:
            out.append((f"{sem}.nodes[{i}].node_id", f"duplicate id {node.node_id!r}"))
        else:
            by_id[node.node_id], index[node.node_id] = node, i

    def ref(path: str, node_id: str | None, module: bool = False) -> None:
        if node_id is None:
            return
        if node_id not in by_id:
            out.append((path, f"unknown node {node_id!r}"))
        elif module and not by_id[node_id].is_module:
            out.append((path, f"{node_id!r} is not a module"))

    for i, edge in enumerate(snap.document.semantic.edges):
        ref(f"{sem}.edges[{i}].source_node_id", edge.source_node_id)
        ref(f"{sem}.edges[{i}].target_node_id", edge.target_node_id)

    # Membership is stored twice (moduleMembers and parentId); both must agree.
    for i, node in enumerate(snap.document.semantic.nodes):
        meta = f"{sem}.nodes[{i}].metadata"
        if node.members and not node.is_module:
            out.append((f"{meta}.moduleMembers", f"{node.node_id!r} is not a module but lists members"))
        for j, member in enumerate(node.members):
            if member not in by_id:
                out.append((f"{meta}.moduleMembers[{j}]", f"unknown node {member!r}"))
            elif (claimed := by_id[member].parent_id) != node.node_id:
                out.append((f"{sem}.nodes[{index[member]}].metadata.parentId",
                            f"{'missing' if claimed is None else repr(claimed)}, but module "
                            f"{node.node_id!r} lists {member!r} as a member"))
        parent = node.parent_id
        if parent is not None:
            ref(f"{meta}.parentId", parent, module=True)
            if parent in by_id and by_id[parent].is_module and node.node_id not in by_id[parent].members:
                out.append((f"{meta}.parentId", f"module {parent!r} does not list "
                            f"{node.node_id!r} in moduleMembers"))
    for node_id in by_id:
        chain, current = [node_id], by_id[node_id].parent_id
        while current in by_id and current not in chain:
            chain.append(current)
            current = by_id[current].parent_id
        if current == node_id:  # report each cycle once, at its node
            out.append((f"{sem}.nodes[{index[node_id]}].metadata.parentId",
                        "module membership cycle: " + " -> ".join(chain + [node_id])))

    view = snap.document.view
    for i, node_id in enumerate(view.collapsed_modules):
        ref(f"document.view.collapsed_modules[{i}]", node_id, module=True)
    for i, node_id in enumerate(view.selection):
        ref(f"document.view.selection[{i}]", node_id)

    collab = snap.collaboration
    groups = [("collaboration.walkthrough.steps", collab.walkthrough.steps),
              ("collaboration.savedViews", collab.saved_views)]
    for base, steps in groups:
        seen: set[str] = set()
        for i, step in enumerate(steps):
            if step.id in seen:
                out.append((f"{base}[{i}].id", f"duplicate id {step.id!r}"))
            seen.add(step.id)
            for j, node_id in enumerate(step.view.expanded_module_ids):
                ref(f"{base}[{i}].view.expandedModuleIds[{j}]", node_id, module=True)
            for j, node_id in enumerate(step.view.selected_node_ids):
                ref(f"{base}[{i}].view.selectedNodeIds[{j}]", node_id)
            for j, anchor in enumerate(step.anchors):
                ref(f"{base}[{i}].anchors[{j}].target.nodeId", anchor.target.node_id)
    view_ids = {s.id for _, steps in groups for s in steps}
    if collab.opening_view_id is not None and collab.opening_view_id not in view_ids:
        out.append(("collaboration.openingViewId",
                    f"{collab.opening_view_id!r} names no step or saved view"))
    return out

