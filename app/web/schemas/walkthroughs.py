"""JSON bodies of the walkthrough API: their models (what OpenAPI documents) and builders.

The builders make the bodies from domain and engine objects; the routes send
those dicts. The models describe them; the tensors body's are in tensors.py.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from app.domain.catalog import CatalogEntry
from app.engine.runtime.records import NodeRecord
from app.views.urls import URLS
from app.web.schemas.base import Body

# -- models ----------------------------------------------------------------------------

class WalkthroughItem(Body):
    """One walkthrough of the catalog (GET /api/walkthroughs), including one that failed to load."""

    id: str = Field(description="The walkthrough's id in URLs.")
    source: str = Field(description="The file it was read from (or the upload's name).")
    name: str | None = Field(description="The graph's name; null when the file failed to load.")
    title: str | None = Field(description="The walkthrough's title; null when the file failed to load.")
    steps: int = Field(description="How many steps it has (0 when it failed to load).")
    runnable: bool = Field(description="True when the server's model matches its nodes (its step JSON answers).")
    error: str | None = Field(description="Why it failed to load; null when it loaded.")


class Position(Body):
    """A point of the drawing, in world coordinates."""

    x: float = Field(description="Horizontal coordinate.")
    y: float = Field(description="Vertical coordinate.")


class Camera(Body):
    """Where a step's view looks."""

    x: float = Field(description="Horizontal centre.")
    y: float = Field(description="Vertical centre.")
    z: float = Field(description="Zoom (> 0).")


class Viewport(Body):
    """The view's size the step was authored for."""

    width: float = Field(description="Width in pixels.")
    height: float = Field(description="Height in pixels.")


class GraphNode(Body):
    """A node of the graph: an operation, a module or an input/output."""

    id: str = Field(description="The node id (as in the step JSON's `nodes`).")
    kind: str = Field(description="The node's kind, e.g. input, module, operation.")
    op: str = Field(description="The operation, e.g. Linear, LogSoftmax, Module.")
    params: dict[str, Any] = Field(description="The operation's parameters as exported.")
    parent: str | None = Field(description="The module that contains it; null at the top level.")
    members: list[str] = Field(description="The node ids a module contains; [] for other nodes.")
    position: Position | None = Field(description="Its drawn position; null when the export has none.")


class GraphEdge(Body):
    """A data-flow edge between two nodes."""

    id: str = Field(description="The edge id.")
    source: str = Field(description="The node the data comes from.")
    target: str = Field(description="The node the data goes to.")


class GraphModule(Body):
    """A module: a node that groups others and can be expanded."""

    id: str = Field(description="The module's node id.")
    template: str | None = Field(description="The code it stands for, e.g. model::CompletionPolicy.")
    members: list[str] = Field(description="The node ids it contains.")
    collapsed: bool = Field(description="True when the document shows it collapsed.")


class WalkthroughStep(Body):
    """One step of the walkthrough: a note and the view that goes with it."""

    id: str = Field(description="The step id (the `step` parameter, the page URL).")
    title: str = Field(description="The step's title.")
    note: str = Field(description="The step's explanation.")
    camera: Camera
    viewport: Viewport
    expanded: list[str] = Field(description="Module ids shown expanded in this step.")
    selected: list[str] = Field(description="Node ids this step selects.")


class WalkthroughSummary(Body):
    """One walkthrough's graph and steps (GET /api/walkthroughs/{id})."""

    id: str = Field(description="The walkthrough's id in URLs.")
    source: str = Field(description="The file it was read from (or the upload's name).")
    name: str = Field(description="The graph's name.")
    title: str = Field(description="The walkthrough's title.")
    steps: list[WalkthroughStep] = Field(description="The steps, in order.")
    runnable: bool = Field(description="True when the server's model matches its nodes (its step JSON answers).")
    error: None = Field(description="Always null: a walkthrough that failed to load answers 404.")
    format: str = Field(description="The export format, tensorviz.graph.")
    version: int = Field(description="The export format's version.")
    opening_step: str = Field(description="The step a visit opens on.")
    nodes: list[GraphNode] = Field(description="Every node of the graph.")
    edges: list[GraphEdge] = Field(description="Every edge of the graph.")
    modules: list[GraphModule] = Field(description="The nodes that are modules.")


class UploadBody(Body):
    """An accepted upload (POST /api/walkthroughs)."""

    id: str = Field(description="Its id: a hash of the file's content, so the same file gets the same id.")
    name: str = Field(description="The graph's name.")
    runnable: bool = Field(description="True when the server's model matches its nodes (its step JSON answers).")
    steps: int = Field(description="How many steps it has.")
    url: str = Field(description="The page of its opening step.")


# -- builders --------------------------------------------------------------------------


def walkthrough_item(entry: CatalogEntry) -> dict:
    snap = entry.snapshot
    return {
        "id": entry.id,
        "source": entry.source,
        "name": snap.name if snap else None,
        "title": snap.collaboration.walkthrough.title if snap else None,
        "steps": len(snap.steps) if snap else 0,
        "runnable": entry.kind is not None,
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
                   "position": (snap.position(n.node_id).model_dump()
                                if n.node_id in snap.document.view.node_positions else None)}
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


def upload_payload(entry: CatalogEntry) -> dict:
    snap = entry.snapshot
    return {"id": entry.id, "name": snap.name, "runnable": entry.kind is not None, "steps": len(snap.steps),
            "url": URLS.step(entry.id, snap.opening_step_id)}
