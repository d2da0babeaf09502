"""What the Inspector shows for any node: its place in the graph, its recorded tensor (when a kind
recorded one) and the words for it. A kind extends InspectorView with its own charts; the template
draws what the view has.

Pure view model: no web framework, no template syntax.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.snapshot import Node, Snapshot
from app.engine.runtime.records import NodeRecord
from app.views.meaning import NodeMeaning


@dataclass(frozen=True)
class EdgeRef:
    node_id: str
    edge_id: str


@dataclass(frozen=True)
class InspectorView:
    node_id: str
    meaning: NodeMeaning
    kind: str
    op: str
    description: str | None
    params: dict
    parent_id: str | None
    members: list[str]
    incoming: list[EdgeRef]
    outgoing: list[EdgeRef]
    record: NodeRecord | None
    value_stats: TensorStats | None
    grad_stats: TensorStats | None
    declared_shape: str | None
    shape_warning: str | None
    anchor_connections: list[dict] = field(default_factory=list)
    shape_note: str | None = None  # the export's palette-default shape, said as information


def flatten(values: Any) -> list[float]:
    """Nested lists/tuples or a scalar → flat list of floats (None → [])."""
    if values is None:
        return []
    if isinstance(values, (list, tuple)):
        return [x for item in values for x in flatten(item)]
    return [float(values)]


@dataclass(frozen=True)
class TensorStats:
    """The line above a tensor table; min, max and mean are None for an empty tensor."""
    min: float | None
    max: float | None
    mean: float | None
    count: int


def tensor_stats(values: Any) -> TensorStats:
    flat = flatten(values)
    if not flat:
        return TensorStats(None, None, None, 0)
    if any(math.isnan(x) for x in flat):
        nan = float("nan")
        return TensorStats(nan, nan, nan, len(flat))
    return TensorStats(min(flat), max(flat), math.fsum(flat) / len(flat), len(flat))


def _dims(shape: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(d) for d in shape.split(","))
    except ValueError:
        return None


def palette_defaults(node: Node) -> list[str]:
    """The shape values the node's palette entry offers as its default (an export's metadata)."""
    palette = node.metadata.layer_type
    return [str(p["defaultValue"]) for p in (palette.parameters if palette else [])
            if p.get("name") == "shape" and p.get("defaultValue") is not None]


def shape_warning(declared: str | None, traced: tuple[int, ...] | None, defaults: Sequence[str] = (),
                  is_input: bool = False) -> str | None:
    """A declared shape the model does not compute: said, never fixed. An input's, or one that is only
    the palette entry's default, is the export's example, not the reader's problem: shape_note says it."""
    if declared is None or traced is None or is_input or declared in defaults:
        return None
    dims = _dims(declared)
    if dims is None:
        return f"declared shape {declared!r} is not a list of integers; traced shape is {traced}"
    if dims == tuple(traced):
        return None
    return f"The file declares shape ({declared}); the traced tensor is {tuple(traced)}. Shown as traced."


def shape_note(declared: str | None, traced: tuple[int, ...] | None, defaults: Sequence[str] = (),
               is_input: bool = False) -> str | None:
    """Information, not an alarm: the file declares the palette entry's default shape (the user's export's
    input, 1,3,224,224), or an input's shape from the export's own trace (the real model's 2,7), where the
    traced one differs."""
    if declared is None or traced is None or _dims(declared) == tuple(traced):
        return None
    what, shown = ("input" if is_input else "tensor"), ",".join(str(d) for d in traced)
    if declared in defaults:
        return f"The file's palette entry declares a default shape {declared}; the traced {what} is {shown}."
    if is_input:
        return f"The file declares shape {declared}, the input it was exported with; the traced input is {shown}."
    return None


def build_inspector(snapshot: Snapshot, node_id: str, meaning: NodeMeaning, record: NodeRecord | None = None,
                    step_id: str | None = None, view: type[InspectorView] = InspectorView,
                    **extra: Any) -> InspectorView:
    """The node's facts from the snapshot, with its record and meaning; `extra` fills the fields a
    kind's `view` class adds."""
    node = snapshot.node(node_id)
    declared = node.params.get("shape") if isinstance(node.params.get("shape"), str) else None
    incoming = [EdgeRef(e.source_node_id, e.edge_id) for e in snapshot.edges if e.target_node_id == node_id]
    outgoing = [EdgeRef(e.target_node_id, e.edge_id) for e in snapshot.edges if e.source_node_id == node_id]
    anchors = []
    if step_id is not None:
        for anchor in snapshot.step(step_id).anchors:
            if anchor.target.node_id == node_id and anchor.context is not None:
                anchors = [c.model_dump(by_alias=False) for c in anchor.context.connections]
    layer_type = node.metadata.layer_type
    traced, defaults = (record.shape if record else None), palette_defaults(node)
    return view(
        node_id=node_id, meaning=meaning, kind=node.kind, op=node.op,
        description=layer_type.description if layer_type else None,
        params=dict(node.params), parent_id=node.parent_id, members=list(node.members),
        incoming=incoming, outgoing=outgoing, record=record,
        value_stats=tensor_stats(record.values) if record else None,
        grad_stats=tensor_stats(record.grad) if record and record.grad is not None else None,
        declared_shape=declared,
        shape_warning=shape_warning(declared, traced, defaults, node.kind == "input"),
        shape_note=shape_note(declared, traced, defaults, node.kind == "input"),
        anchor_connections=anchors, **extra,
    )
