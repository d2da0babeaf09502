"""JSON shapes of the API, built from domain objects (no web framework here)."""
from __future__ import annotations

from .catalog import CatalogEntry
from .engine import RUNNABLE_NODE_IDS, NodeRecord, StepResult
from .engine.run import RUNNABLE_NODE_OPS
from .graph import visible_node_ids
from .snapshot import Snapshot


def is_runnable(snapshot: Snapshot) -> bool:
    """The torch model matches a snapshot that has exactly its nodes, with their ops."""
    return snapshot.node_ids == RUNNABLE_NODE_IDS and all(
        snapshot.node(n).op == op for n, op in RUNNABLE_NODE_OPS.items())


def walkthrough_item(entry: CatalogEntry) -> dict:
    snap = entry.snapshot
    return {
        "id": entry.id,
        "source": entry.source,
        "name": snap.name if snap else None,
        "title": snap.collaboration.walkthrough.title if snap else None,
        "steps": len(snap.steps) if snap else 0,
        "runnable": bool(snap and is_runnable(snap)),
        "error": entry.error,
    }


def walkthrough_summary(entry: CatalogEntry) -> dict:
    snap = entry.snapshot
    return {
        **walkthrough_item(entry),
        "format": snap.format,
        "version": snap.version,
        "opening_step": snap.opening_step_id,
        "nodes": [{"id": n.node_id, "kind": n.kind, "op": n.op, "params": n.params,
                   "parent": n.parent_id, "members": n.members,
                   "position": snap.position(n.node_id).model_dump() if n.node_id in snap.document.view.node_positions else None}
                  for n in snap.nodes],
        "edges": [{"id": e.edge_id, "source": e.source_node_id, "target": e.target_node_id}
                  for e in snap.edges],
        "modules": [{"id": m.node_id, "template": m.metadata.module_template_id, "members": m.members,
                     "collapsed": m.node_id in snap.document.view.collapsed_modules}
                    for m in snap.modules],
        "steps": [{"id": s.id, "title": s.title, "note": s.note, "camera": s.view.camera.model_dump(),
                   "viewport": s.view.viewport.model_dump(), "expanded": s.view.expanded_module_ids,
                   "selected": s.view.selected_node_ids} for s in snap.steps],
    }


def node_payload(record: NodeRecord) -> dict:
    if record.inactive_reason is not None:
        return {"inactive": True, "reason": record.inactive_reason, "shape": None, "dtype": None,
                "values": None, "grad": None}
    return {"shape": list(record.shape), "dtype": record.dtype, "values": record.values,
            "grad": record.grad, "no_grad_reason": record.no_grad_reason}


def tensors_payload(walkthrough_id: str, snapshot: Snapshot, result: StepResult,
                    step_id: str | None = None, node_id: str | None = None) -> dict:
    """With a step: the nodes visible in that step's view; without: all nodes."""
    selected: list[str] = []
    if step_id is not None:
        step = snapshot.step(step_id)
        node_ids = visible_node_ids(snapshot, step.view.expanded_module_ids)
        selected = step.view.selected_node_ids
    else:
        node_ids = [n.node_id for n in snapshot.nodes]
    if node_id is not None:
        node_ids = [node_id]
    return {
        "walkthrough": walkthrough_id,
        "step": step_id,
        "kind": result.kind,
        "device": result.device,
        "params": result.params.model_dump(),
        "prompt": {"index": result.params.prompt, "features": list(result.prompt.features),
                   "correct_choice": result.prompt.correct},
        "history": result.history,
        "samples": result.samples,
        "objective": result.objective,
        "loss": result.loss,
        "selected": selected,
        "nodes": {nid: node_payload(result.nodes[nid]) for nid in node_ids},
        "parameter_grads": result.parameter_grads,
    }


def upload_payload(entry: CatalogEntry) -> dict:
    snap = entry.snapshot
    return {"id": entry.id, "name": snap.name, "runnable": is_runnable(snap), "steps": len(snap.steps),
            "url": f"/walkthroughs/{entry.id}/steps/{snap.opening_step_id}"}
