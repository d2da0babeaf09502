"""What the Inspector shows for one node: its place in the graph, its live tensors and charts.

Pure view model: no web framework, no template syntax. Charts are built here,
so the template only draws them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from app.domain.snapshot import Snapshot
from app.engine.runtime.records import NodeRecord
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.views.charts.advantages import AdvantageBars, advantage_bars
from app.kinds.toy.views.charts.clip_plot import ClipPlot, clip_plot
from app.kinds.toy.views.charts.probabilities import ProbabilityBars, probability_bars
from app.views.meaning import NodeMeaning, choice_label, filled_formula, node_meaning

# Log-probability nodes get probability bars; GRPO nodes get the group chart.
PROBABILITY_NODE_SUFFIXES = ("log_probabilities",)
POLICY_MODULES = ("policy", "old_policy", "reference_policy")
CLIP_NODES = ("ratio", "clipped", "python@ratio#0", "python@clipped#0")
MAX_ROWS = 64  # per-sample lists and tables show this many; the JSON API has them all


@dataclass(frozen=True)
class EdgeRef:
    node_id: str
    edge_id: str


@dataclass(frozen=True)
class FilledLine:
    """The node's formula written with one sample's recorded numbers."""
    index: int
    choice: int
    text: str  # "ρ₃ = exp(−1.204 − (−1.386)) = 1.200"
    clip_active: bool
    dual_clip_hit: bool = False  # A < 0 and the dual clip's floor c·A bound


@dataclass(frozen=True)
class RewardInput:
    """One sample's reward, as it enters the advantages."""
    index: int
    choice: int
    choice_label: str  # "2 · readable correct"
    reward: float


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
    probability_charts: tuple[ProbabilityBars, ...] = ()  # one per row of log-probabilities
    advantage_chart: AdvantageBars | None = None
    clip_chart: ClipPlot | None = None
    anchor_connections: list[dict] = field(default_factory=list)
    choice_labels: tuple[str, ...] = ()  # one per sample of the run: "2 · readable correct"
    filled: tuple[FilledLine, ...] = ()  # the formula with each sample's numbers (first MAX_ROWS)
    reward_inputs: tuple[RewardInput, ...] = ()  # advantages: the rewards that feed them


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


def shape_warning(declared: str | None, traced: tuple[int, ...] | None) -> str | None:
    """The export's input declares the palette default 1,3,224,224; say so rather than fix it."""
    if declared is None or traced is None:
        return None
    try:
        declared_dims = tuple(int(d) for d in declared.split(","))
    except ValueError:
        return f"declared shape {declared!r} is not a list of integers; traced shape is {traced}"
    if declared_dims == tuple(traced):
        return None
    return (f"The file declares shape ({declared}), the palette's default; the traced tensor is "
            f"{tuple(traced)}, which is what Linear(3, 4) takes. Shown as traced.")


def sample_choice_labels(result: StepResult) -> tuple[str, ...]:
    """Each sample's action named after what it stands for in the run's prompt."""
    return tuple(choice_label(result.prompt, s["action"]) if isinstance(s.get("action"), int) else "?"
                 for s in result.samples)


def _charts(node_id: str, record: NodeRecord | None, result: StepResult | None,
            step_id: str | None, labels: tuple[str, ...]) -> dict:
    charts: dict = {}
    values = record.values if record is not None else None
    has_values = values is not None
    if result is None:
        return charts
    if isinstance(values, list) and (node_id.endswith(PROBABILITY_NODE_SUFFIXES) or node_id in POLICY_MODULES):
        charts["probability_charts"] = tuple(
            probability_bars(row, result.prompt.correct,
                             [choice_label(result.prompt, c) for c in range(len(row))] if isinstance(row, list)
                             else None)
            for row in values)
    if has_values and node_id == "advantages":
        samples = result.samples
        charts["advantage_chart"] = advantage_bars([s["advantage"] for s in samples], [s["reward"] for s in samples],
                                                   [s["clip_active"] for s in samples], labels)
    if result.kind == "grpo" and (node_id in CLIP_NODES or step_id == "clip"):
        charts["clip_chart"] = clip_plot(result.params.clip_epsilon, result.samples, labels,
                                         epsilon_high=result.params.clip_epsilon_high)
    return charts


def _sample_lines(snapshot: Snapshot, node_id: str, result: StepResult | None, labels: tuple[str, ...]) -> dict:
    """The per-sample formula lines, and for the advantages the rewards that feed them."""
    if result is None or result.kind != "grpo":
        return {}
    shown = list(enumerate(result.samples[:MAX_ROWS]))
    lines: dict = {}
    filled = [(i, s, filled_formula(snapshot, node_id, result, i)) for i, s in shown]
    if all(text is not None for *_, text in filled):
        lines["filled"] = tuple(FilledLine(i, s["action"], text or "", bool(s["clip_active"]),
                                           bool(s.get("dual_clip_hit")))
                                for i, s, text in filled)
    if node_id == "advantages":
        lines["reward_inputs"] = tuple(RewardInput(i, s["action"], labels[i], s["reward"]) for i, s in shown)
    return lines


def _meaning(snapshot: Snapshot, node_id: str, result: StepResult | None) -> NodeMeaning:
    """Under a GRPO run, the formulas of the run's conventions and the loss's aggregation note."""
    if result is None or result.kind != "grpo":
        return node_meaning(snapshot, node_id)
    return node_meaning(snapshot, node_id, result.params.conventions(), len(result.samples))


def build_inspector(snapshot: Snapshot, node_id: str, result: StepResult | None,
                    step_id: str | None = None) -> InspectorView:
    node = snapshot.node(node_id)
    record = result.nodes.get(node_id) if result else None
    declared = node.params.get("shape") if isinstance(node.params.get("shape"), str) else None
    incoming = [EdgeRef(e.source_node_id, e.edge_id) for e in snapshot.edges if e.target_node_id == node_id]
    outgoing = [EdgeRef(e.target_node_id, e.edge_id) for e in snapshot.edges if e.source_node_id == node_id]
    anchors = []
    if step_id is not None:
        for anchor in snapshot.step(step_id).anchors:
            if anchor.target.node_id == node_id and anchor.context is not None:
                anchors = [c.model_dump(by_alias=False) for c in anchor.context.connections]
    layer_type = node.metadata.layer_type
    labels = sample_choice_labels(result) if result is not None else ()
    return InspectorView(
        node_id=node_id, meaning=_meaning(snapshot, node_id, result), kind=node.kind, op=node.op,
        description=layer_type.description if layer_type else None,
        params=dict(node.params), parent_id=node.parent_id, members=list(node.members),
        incoming=incoming, outgoing=outgoing, record=record,
        value_stats=tensor_stats(record.values) if record else None,
        grad_stats=tensor_stats(record.grad) if record and record.grad is not None else None,
        declared_shape=declared,
        shape_warning=shape_warning(declared, record.shape if record else None),
        anchor_connections=anchors, **_charts(node_id, record, result, step_id, labels),
        choice_labels=labels, **_sample_lines(snapshot, node_id, result, labels),
    )
