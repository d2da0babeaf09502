"""What the Inspector shows for one node: its place in the graph, its live tensors and charts.

Pure view model: no web framework, no template syntax. Charts are built here,
so the template only draws them.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.snapshot import Snapshot
from app.engine.runtime.records import NodeRecord
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.views.charts.advantages import AdvantageBars, advantage_bars
from app.kinds.toy.views.charts.clip_plot import ClipPlot, clip_plot
from app.kinds.toy.views.charts.probabilities import ProbabilityBars, probability_bars
from app.kinds.toy.views.meaning import choice_label, filled_formula
from app.views.inspector import InspectorView, build_inspector
from app.views.meaning import NodeMeaning, node_meaning

# Log-probability nodes get probability bars; GRPO nodes get the group chart.
PROBABILITY_NODE_SUFFIXES = ("log_probabilities",)
POLICY_MODULES = ("policy", "old_policy", "reference_policy")
CLIP_NODES = ("ratio", "clipped", "python@ratio#0", "python@clipped#0")
MAX_ROWS = 64  # per-sample lists and tables show this many; the JSON API has them all


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
        # No clip marks here: the clip is the clip chart's to show, and a clipped answer's
        # advantage is what it is (marking it here contradicted the bars before the clip step).
        charts["advantage_chart"] = advantage_bars([s["advantage"] for s in samples], [s["reward"] for s in samples],
                                                   None, labels)
    if result.kind == "grpo" and (node_id in CLIP_NODES or step_id == "clip"):
        charts["clip_chart"] = clip_plot(result.conventions.clip_epsilon, result.samples, labels,
                                         epsilon_high=result.conventions.clip_epsilon_high)
    return charts


def _sample_lines(snapshot: Snapshot, node_id: str, result: StepResult | None, labels: tuple[str, ...]) -> dict:
    """The per-sample formula lines, and for the advantages the rewards that feed them."""
    if result is None or result.kind != "grpo":
        return {}
    shown = list(enumerate(result.samples[:MAX_ROWS]))
    lines: dict = {}
    filled = [(i, s, filled_formula(snapshot, node_id, result, i)) for i, s in shown]
    if all(text is not None for *_, text in filled):
        # ✂ only on the lines of the clip's own nodes: a KL or advantage line is not clipped.
        clip_node = node_id in CLIP_NODES
        lines["filled"] = tuple(FilledLine(i, s["action"], text or "", clip_node and bool(s["clip_active"]),
                                           clip_node and bool(s.get("dual_clip_hit")))
                                for i, s, text in filled)
    if node_id == "advantages":
        lines["reward_inputs"] = tuple(RewardInput(i, s["action"], labels[i], s["reward"]) for i, s in shown)
    return lines


def _meaning(snapshot: Snapshot, node_id: str, result: StepResult | None) -> NodeMeaning:
    """Under a GRPO run, the formulas of the run's conventions and the loss's aggregation note."""
    if result is None or result.kind != "grpo":
        return node_meaning(snapshot, node_id)
    return node_meaning(snapshot, node_id, result.conventions, len(result.samples))


@dataclass(frozen=True)
class ToyInspectorView(InspectorView):
    """The toy's inspector: the shared facts plus its charts and per-sample lines."""
    probability_charts: tuple[ProbabilityBars, ...] = ()  # one per row of log-probabilities
    advantage_chart: AdvantageBars | None = None
    clip_chart: ClipPlot | None = None
    choice_labels: tuple[str, ...] = ()  # one per sample of the run: "2 · readable correct"
    filled: tuple[FilledLine, ...] = ()  # the formula with each sample's numbers (first MAX_ROWS)
    reward_inputs: tuple[RewardInput, ...] = ()  # advantages: the rewards that feed them




def build_toy_inspector(snapshot: Snapshot, node_id: str, result: StepResult | None,
                        step_id: str | None = None) -> ToyInspectorView:
    record = result.nodes.get(node_id) if result else None
    labels = sample_choice_labels(result) if result is not None else ()
    view = build_inspector(snapshot, node_id, _meaning(snapshot, node_id, result), record, step_id,
                           ToyInspectorView, **_charts(node_id, record, result, step_id, labels),
                           choice_labels=labels, **_sample_lines(snapshot, node_id, result, labels))
    assert isinstance(view, ToyInspectorView)
    return view
