"""The body of GET /api/walkthroughs/{id}/compare: one step under two sets of conventions.

Side A is the step of the ordinary query parameters; side B re-scores A's policy, group and
rewards with the `vs_` conventions (engine/compare.py). The route never validates the body:
these models document it and tests/kinds/toy/test_compare_api.py validates real bodies against them.
"""
from __future__ import annotations

from pydantic import Field, create_model

from app.domain.snapshot import Snapshot
from app.engine.grpo.params import Conventions
from app.kinds.toy.engine.compare import Comparison, GradChange
from app.kinds.toy.web.schemas.tensors import StepParams, TensorRecord
from app.views.graph_layout import visible_node_ids
from app.web.schemas.base import Body
from app.web.schemas.walkthroughs import node_payload

# Conventions as the body echoes them: every field always sent, the preset included.
SideBParams = create_model(
    "SideBParams", __base__=Body, __module__=__name__,
    __doc__="Side B's conventions, every effective value (the preset's, then the vs_ overrides).",
    **{name: (field.annotation, Field(description=field.description))
       for name, field in Conventions.model_fields.items()},
)


class CompareSample(Body):
    """One completion of the group on one side: the same completion on both sides."""

    action: int = Field(description="The sampled choice (0-3); the same on both sides.")
    reward: float = Field(description="r: its reward; the same on both sides.")
    reward_used: float = Field(description="The reward the advantages use: r, less β·KL with kl_placement=reward.")
    logp: float = Field(description="log π_θ(choice); the same on both sides.")
    logp_old: float = Field(description="log π_old(choice); the same on both sides.")
    logp_ref: float = Field(description="log π_ref(choice); the same on both sides.")
    advantage: float = Field(description="Â under this side's advantage_std and advantage_epsilon.")
    ratio: float = Field(description="ρ = π_θ/π_old (after log_ratio_clamp, if set).")
    clipped: float = Field(description="The clipped surrogate term (with dual clip, if set).")
    divergence: float = Field(description="The KL estimate D of this side's kl_estimator (after kl_clamp).")
    kl_used: float = Field(description="The KL term the loss uses: D, or D·ρ with kl_bias_correction; "
                                       "π_old's KL with kl_placement=reward.")
    kl_rho_factor: float | None = Field(description="ρ when kl_bias_correction multiplies the KL by it; "
                                                    "else null.")
    objective: float = Field(description="This completion's objective term: clipped − β·kl_used.")
    weight: float = Field(description="What its term counts for in the loss (loss_aggregation).")
    clip_active: bool = Field(description="The clip band binds: d(loss)/dρ is 0 for this completion.")
    dual_clip_hit: bool = Field(description="The dual clip's floor c·Â binds (A < 0).")
    ratio_clamped: bool = Field(description="log_ratio_clamp cut this log-ratio.")
    kl_log_ratio_clamped: bool = Field(description="log_ratio_clamp cut the KL's log-ratio.")
    kl_clamped: bool = Field(description="kl_clamp cut the KL estimate.")
    ratio_grad: float = Field(description="d(loss)/dρ for this completion.")
    grad_logp: float = Field(description="∂loss/∂log π_θ(o_i) for this completion: grad_surrogate + grad_kl.")
    grad_surrogate: float = Field(description="The part of grad_logp from the clipped advantage term, "
                                              "−w·∂(clipped)/∂log π: 0 where the clip binds.")
    grad_kl: float = Field(description="The part of grad_logp from the KL penalty, w·β·∂(kl_used)/∂log π: "
                                       "nonzero on clipped rows too; 0 with β = 0 or kl_placement=reward.")


class CompareSide(Body):
    """One side's group, objective and loss."""

    samples: list[CompareSample] = Field(description="Per completion, in the group's order.")
    objective: float = Field(description="J, the objective maximised.")
    loss: float = Field(description="The loss back-propagated, −J.")


class GradChangeBody(Body):
    """How a node's (or parameter's) gradient changes from A to B."""

    norm_a: float = Field(description="‖∇a‖: the norm of d(loss)/d(output) on side A.")
    norm_b: float = Field(description="‖∇b‖: the same on side B.")
    diff: float = Field(description="‖∇a − ∇b‖.")
    relative: float | None = Field(description="‖∇a − ∇b‖ / ‖∇a‖; null when ‖∇a‖ = 0 < ‖∇b‖ (unbounded); "
                                               "0 when both are 0.")


class CompareNode(Body):
    """A node's tensor on both sides and its gradient change."""

    a: TensorRecord
    b: TensorRecord
    grad_change: GradChangeBody | None = Field(description="null when neither side sends it a gradient.")


class CompareBody(Body):
    """One GRPO step computed twice on the same samples: A (the query parameters) and B (the vs_ ones)."""

    walkthrough: str = Field(description="The walkthrough's id.")
    step: str | None = Field(description="The step whose visible nodes are in `nodes`; null: all nodes.")
    device: str = Field(description="The torch device that computed it.")
    params_a: StepParams = Field(description="Side A's parameters, every effective value.")
    params_b: SideBParams = Field(description="Side B's conventions, every effective value; B takes every "
                                              "other parameter (seed, G, rewards, …) and the samples from A.")
    a: CompareSide
    b: CompareSide
    grad_change: dict[str, GradChangeBody | None] = Field(
        description="Per node id and per policy parameter (policy.logits.weight, …): ‖∇a − ∇b‖ / ‖∇a‖ "
                    "and the norms; null where neither side has a gradient.")
    nodes: dict[str, CompareNode] = Field(
        description="Per node (all nodes, the step's visible ones, or `node`): A's and B's tensors.")


def _change(change: GradChange | None) -> dict | None:
    if change is None:
        return None
    return {"norm_a": change.norm_a, "norm_b": change.norm_b, "diff": change.diff, "relative": change.relative}


def compare_payload(walkthrough_id: str, snapshot: Snapshot, comparison: Comparison,
                    step_id: str | None = None, node_id: str | None = None) -> dict:
    """With a step: the nodes visible in its view; with a node: that one; else all nodes."""
    if node_id is not None:
        node_ids = [node_id]
    elif step_id is not None:
        node_ids = visible_node_ids(snapshot, snapshot.step(step_id).view.expanded_module_ids)
    else:
        node_ids = [n.node_id for n in snapshot.nodes]
    a, b = comparison.a, comparison.b
    return {
        "walkthrough": walkthrough_id,
        "step": step_id,
        "device": a.device,
        "params_a": a.params.model_dump(),
        "params_b": comparison.conventions_b.model_dump(),
        "a": {"samples": a.samples, "objective": a.objective, "loss": a.loss},
        "b": {"samples": b.samples, "objective": b.objective, "loss": b.loss},
        "grad_change": {k: _change(v) for k, v in comparison.grad_change.items()},
        "nodes": {nid: {"a": node_payload(a.nodes[nid]), "b": node_payload(b.nodes[nid]),
                        "grad_change": _change(comparison.grad_change.get(nid))} for nid in node_ids},
    }
