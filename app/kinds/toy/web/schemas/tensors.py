"""The body of GET /api/walkthroughs/{id}/step (built by tensors_payload below).

Large (G = 4096 sends megabytes), so the route never validates it: these models
document it, and the tests validate real bodies against them.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, create_model

from app.domain.snapshot import Snapshot
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from app.views.graph_layout import visible_node_ids
from app.web.schemas.base import Body, TensorValues, optional_key
from app.web.schemas.walkthroughs import node_payload

Role = Literal["correct", "mixed", "unformatted", "wrong"]
ROLE = "What the choice stands for: correct (readable), mixed (mixed-language), unformatted or wrong."
STAGE_KINDS = "sft, grpo, rejection_sampling or distill_sft"


# GRPOParams as the body echoes it: every field always sent (the engine's model marks
# them optional, as a request may omit them). Mirrored field by field, so it cannot lag.
StepParams = create_model(
    "StepParams", __base__=Body, __module__=__name__,
    __doc__="The parameters of the step, after validation and defaults (see the query parameters).",
    **{name: (field.annotation, Field(description=field.description))
       for name, field in GRPOParams.model_fields.items()},
)


class TensorRecord(Body):
    """A node's output tensor and d(loss)/d(output), as computed by PyTorch."""

    shape: list[int] = Field(description="The tensor's shape ([] for a scalar).")
    dtype: str = Field(description="torch dtype without the `torch.` prefix, e.g. float64.")
    values: TensorValues
    grad: TensorValues | None = Field(description="d(loss)/d(values), same shape; null when no gradient "
                                                   "flows here (see no_grad_reason).")
    no_grad_reason: str | None = Field(description="Why `grad` is null; null when it is not.")


class InactiveRecord(Body):
    """A node that takes no part in the computation shown (e.g. the clip in an SFT stage): no numbers."""

    inactive: Literal[True] = Field(description="Always true: this node is not computed here.")
    reason: str = Field(description="Why the node takes no part, e.g. \"takes no part in a supervised (sft) stage\".")
    shape: None = Field(description="Always null.")
    dtype: None = Field(description="Always null.")
    values: None = Field(description="Always null.")
    grad: None = Field(description="Always null.")


class ParameterGrad(Body):
    """One parameter of the policy after the shown update's backward pass."""

    shape: list[int] = Field(description="The parameter's shape.")
    values: TensorValues
    grad: TensorValues | None = Field(description="d(loss)/d(parameter), same shape; null when the step "
                                                   "takes no gradient.")


class PromptInfo(Body):
    """The toy prompt the group answers."""

    index: int = Field(description="Which of the six toy prompts (the `prompt` parameter).")
    features: list[float] = Field(description="The prompt's 3-feature input vector.")
    correct_choice: int = Field(description="The choice (0-3) that is the readable correct answer.")


class GRPOSample(Body):
    """One completion of the group in a GRPO step."""

    action: int = Field(description="The sampled choice (0-3).")
    reward: float = Field(description="r: its reward (the rule's, or the `rewards` override).")
    logp: float = Field(description="log π_θ(choice): the current policy's log-probability.")
    logp_old: float = Field(description="log π_old(choice): the frozen old policy's log-probability.")
    logp_ref: float = Field(description="log π_ref(choice): the reference policy's log-probability.")
    reward_used: float = Field(description="The reward that enters the advantages: r itself, or r - β·KL(π_old "
                                           "|| π_ref) with kl_placement=reward.")
    advantage: float = Field(description="A = (r_used - mean) / (std + advantage_epsilon) within the group, with "
                                         "the population or sample (Bessel) std as advantage_std says; "
                                         "r_used - mean with advantage_std=none.")
    ratio: float = Field(description="ρ = π_θ/π_old per completion (log-ratio clamped first with log_ratio_clamp).")
    clipped: float = Field(description="min(ρ·A, clip(ρ, 1-clip_epsilon, 1+clip_epsilon_high)·A): the clipped "
                                       "surrogate; with dual_clip c, floored at c·A where A < 0.")
    divergence: float = Field(description="The kl_estimator's (k1, k2 or k3) estimate of KL(π_θ || π_ref) for this "
                                          "completion, after any clamp; of π_old with kl_placement=reward.")
    kl_used: float = Field(description="The KL term β multiplies: divergence, times ρ with kl_bias_correction; "
                                       "with kl_placement=reward the divergence that went into the reward.")
    kl_rho_factor: float | None = Field(description="ρ, the factor kl_bias_correction multiplies the KL term by "
                                                    "(TRL); null without bias correction.")
    objective: float = Field(description="This completion's term of the objective: clipped - β·kl_used "
                                         "(clipped alone with kl_placement=reward).")
    weight: float = Field(description="What the completion counts for in the loss, loss = -Σ weight·objective: "
                                      "1/G for sample_mean and token_mean (one-token completions), "
                                      "1/(G·max_length) for token_sum_norm.")
    clip_active: bool = Field(description="True when the clip binds (ρ beyond 1+clip_epsilon_high with A > 0, or "
                                          "below 1-clip_epsilon with A < 0), so d(loss)/dρ is 0 for this completion.")
    dual_clip_hit: bool = Field(description="True when A < 0 and the dual clip's floor c·A binds (always false "
                                            "without dual_clip).")
    ratio_clamped: bool = Field(description="True when |log π_θ - log π_old| exceeded log_ratio_clamp and was "
                                            "clamped before exp().")
    kl_log_ratio_clamped: bool = Field(description="True when the KL's log-ratio exceeded log_ratio_clamp and was "
                                                   "clamped.")
    kl_clamped: bool = Field(description="True when the KL estimate exceeded ±kl_clamp and was clamped.")
    ratio_grad: float = Field(description="d(loss)/dρ for this completion.")
    grad_logp: float = Field(description="∂loss/∂log π_θ(o_i) for this completion: grad_surrogate + grad_kl.")
    grad_surrogate: float = Field(description="The part of grad_logp from the clipped advantage term, "
                                              "−w·∂(clipped)/∂log π: 0 where the clip binds.")
    grad_kl: float = Field(description="The part of grad_logp from the KL penalty, w·β·∂(kl_used)/∂log π: "
                                       "nonzero on clipped rows too; 0 with β = 0 or kl_placement=reward.")


class TrainingPairSample(Body):
    """One (prompt, choice) training pair of a supervised (sft / distill_sft) stage."""

    action: int = Field(description="The target choice (0-3).")
    role: Role = Field(description=ROLE)
    logp: float = Field(description="log π_θ(choice) of the policy being updated.")


class KeptSample(Body):
    """One sample that a rejection-sampling stage kept."""

    action: int = Field(description="The sampled choice (0-3).")
    role: Role = Field(description=ROLE)
    logp: float = Field(description="log π(choice) of the sampling policy.")
    kept: Literal[True] = Field(description="Always true: only kept samples are listed.")


class StepHistory(Body):
    """How the walkthrough's policy got to the shown update (DeepSeekMath Algorithm 1)."""

    iterations_before: int = Field(description="GRPO iterations run before the current one.")
    updates_per_iteration: int = Field(description="μ: policy updates per sampled group.")
    updates_in_current_iteration: int = Field(description="Updates already made in the current iteration.")
    policy_updates_so_far: int = Field(description="iteration·μ + inner_step: updates before the shown one.")
    old_policy: str = Field(description="When π_old was frozen.")
    reference_policy: str = Field(description="What π_ref is.")
    reward_rule: str = Field(description="Where the rewards come from: the accuracy rule or the override.")


class StageHistory(Body):
    """Where the shown step sits in a training path (with `process`)."""

    process: str = Field(description="The training path's id.")
    stage: str = Field(description="The stage's id.")
    stage_kind: Literal["sft", "grpo", "rejection_sampling", "distill_sft"] = Field(description=STAGE_KINDS)
    stage_title: str = Field(description="The stage's title.")
    start_checkpoint: str = Field(description="The checkpoint the stage starts from.")
    reference_checkpoint: str = Field(description="The checkpoint π_ref is frozen at.")
    shown: str = Field(description="Which update (or which samples) the numbers are.")


class GRPOStageHistory(StageHistory):
    """A GRPO stage's last update."""

    stage_kind: Literal["grpo"] = Field(description="grpo")
    reward_rule: str = Field(description="The stage's reward components, joined by \" + \".")


class SFTStageHistory(StageHistory):
    """A supervised stage's last update."""

    stage_kind: Literal["sft", "distill_sft"] = Field(description="sft, or distill_sft for a student.")
    training_pairs_for_prompt: int = Field(description="Training pairs of this prompt in the stage's data.")
    student: bool = Field(description="True for distillation: a student learns from the teacher's samples.")


class SamplingStageHistory(StageHistory):
    """A rejection-sampling stage: no update, samples kept by a reward filter."""

    stage_kind: Literal["rejection_sampling"] = Field(description="rejection_sampling")
    kept: int = Field(description="Samples kept over all prompts.")
    sampled: int = Field(description="Samples drawn over all prompts.")
    reward_rule: str = Field(description="The filter's reward components, joined by \" + \".")


class ShownUpdate(Body):
    """The ε, ε_high and β the shown update's objective used: `params`' clip_epsilon and beta, or
    step_clip_epsilon and step_beta where the request sets them (the earlier updates keep the former)."""

    clip_epsilon: float = Field(description="ε_low of the shown update.")
    clip_epsilon_high: float = Field(description="ε_high of the shown update (follows step_clip_epsilon "
                                                 "unless clip_epsilon_high is set).")
    beta: float = Field(description="β of the shown update.")


class TensorsBody(Body):
    """Every number of one GRPO step (or of a training path's stage step), computed by PyTorch."""

    process: str = optional_key("The training path shown; present only with `?process=`.")
    stage: str = optional_key("Its stage shown; present only with `?process=`.")
    walkthrough: str = Field(description="The walkthrough's id.")
    step: str | None = Field(description="The walkthrough step whose visible nodes are sent; null: all nodes.")
    kind: Literal["grpo", "sft", "rejection_sampling"] = Field(
        description="What the step is: a GRPO update, a supervised update, or rejection sampling (no update).")
    device: str = Field(description="The torch device that computed it, e.g. cpu or cuda.")
    params: StepParams = Field(description="The parameters of the step, after validation and defaults "
                                           "(a stage's own G, ε, β with `process`).")
    shown_update: ShownUpdate = Field(description="The ε, ε_high and β the shown update used (the band and "
                                                  "the KL weight the numbers are computed with).")
    prompt: PromptInfo
    history: StepHistory | GRPOStageHistory | SFTStageHistory | SamplingStageHistory = Field(
        description="How the policy got here: the walkthrough's iterations, or the training path's stage.")
    samples: list[GRPOSample] | list[TrainingPairSample] | list[KeptSample] = Field(
        description="Per completion: the group of a GRPO step, the training pairs of a supervised step, "
                    "or the kept samples of rejection sampling.")
    objective: float = Field(description="J, the objective maximised: the group's mean objective term "
                                         "(GRPO), -loss (SFT), 0 (rejection sampling).")
    loss: float = Field(description="The loss back-propagated: -J (GRPO), this prompt's share of the "
                                    "cross-entropy (SFT), 0 (rejection sampling).")
    selected: list[str] = Field(description="Node ids the step selects; [] without `step`.")
    nodes: dict[str, TensorRecord | InactiveRecord] = Field(
        description="Per node id (all nodes, the step's visible ones, or `node`): its tensor, or an "
                    "inactive record when the node takes no part.")
    parameter_grads: dict[str, ParameterGrad] = Field(
        description="Per policy parameter (policy.logits.weight, …): values and gradient; {} when the "
                    "step takes no gradient.")


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
        "shown_update": {name: getattr(result.conventions, name)
                         for name in ("clip_epsilon", "clip_epsilon_high", "beta")},
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
