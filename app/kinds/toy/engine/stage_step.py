"""The node view of one process stage: its final training step, replayed and recorded.

GRPO stages replay their last update through ToyGRPO (same recorder as the
walkthrough). SFT stages record the policy's forward pass and the gradient of
the cross-entropy; rejection sampling records forward values only. Nodes that
take no part in a stage are marked inactive, never given invented numbers.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from app.engine.grpo.head import DTYPE
from app.engine.runtime.compute import cached_computation
from app.engine.runtime.recorder import capture, node_record, parameter_grads
from app.engine.runtime.records import NodeRecord
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.model import ToyConfig, ToyGRPO
from app.kinds.toy.engine.node_map import NO_GRAD_REASON, POLICY_NODES, RUNNABLE_NODE_IDS
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.processes import GROUP_SIZE, GRPO_LR, INNER_STEPS, ProcessRun, StageRun, X, new_policy
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.step import record_grpo_step

GRPO_ONLY = sorted(RUNNABLE_NODE_IDS - set(POLICY_NODES) - {"output"})


def _policy_outputs(policy, x, with_grad: bool) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The policy's forward pass with its nodes recorded (the GRPO step's recorder)."""
    with capture({"policy.logits": policy.logits, "policy.log_probabilities": policy.log_probabilities}) as outputs:
        x = x.clone().requires_grad_(with_grad)
        with torch.set_grad_enabled(with_grad):
            logp = policy(x)
    outputs["input"], outputs["policy"] = x, logp
    return outputs, logp


@cached_computation(maxsize=256)
def stage_step(run: ProcessRun, stage_id: str, prompt: int) -> StepResult:
    stage_run = run.stage(stage_id)
    kind = stage_run.stage.kind
    if kind == "grpo":
        return _grpo_step(run, stage_run, prompt)
    if kind in ("sft", "distill_sft"):
        return _sft_step(run, stage_run, prompt)
    return _sampling_step(run, stage_run, prompt)


def _history(run: ProcessRun, stage_run: StageRun, **extra) -> dict:
    st = stage_run.stage
    return {"process": run.process_id, "stage": st.id, "stage_kind": st.kind, "stage_title": st.title,
            "start_checkpoint": st.start, "reference_checkpoint": st.reference, **extra}


def _grpo_step(run: ProcessRun, stage_run: StageRun, prompt: int) -> StepResult:
    last = stage_run.final_update
    if last.old_state is None or last.actions is None or last.rewards is None:
        raise ValueError(f"stage {stage_run.stage.id!r}: a GRPO update keeps its old policy and group")
    cfg = ToyConfig()
    model = ToyGRPO(cfg).to(DTYPE)
    model.policy.load_state_dict(last.policy_state)
    model.old_policy.load_state_dict(last.old_state)
    model.reference_policy.load_state_dict(last.reference_state)
    recorded = record_grpo_step(model, X[prompt:prompt + 1], last.actions[prompt], last.rewards[prompt])
    params = GRPOParams(seed=run.seed, group_size=GROUP_SIZE, learning_rate=GRPO_LR, inner_steps=INNER_STEPS,
                        inner_step=INNER_STEPS - 1, iteration=len(stage_run.curve) - 1, prompt=prompt)
    history = _history(run, stage_run, shown=f"the stage's last update (iteration {len(stage_run.curve)}, "
                       f"update {INNER_STEPS} of {INNER_STEPS}) for prompt {prompt}; the stage averages "
                       "this loss over the six prompts", reward_rule=" + ".join(stage_run.stage.reward))
    return StepResult(params, "cpu", TOY_PROMPTS[prompt], recorded.samples, recorded.objective, recorded.loss,
                      recorded.nodes, recorded.parameter_grads, history, kind="grpo")


def _inactive(node_ids, reason) -> dict[str, NodeRecord]:
    return {n: NodeRecord.inactive(reason) for n in node_ids}


def _sft_step(run: ProcessRun, stage_run: StageRun, prompt: int) -> StepResult:
    last = stage_run.final_update
    st = stage_run.stage
    policy = new_policy(last.policy_state)
    outputs, logp = _policy_outputs(policy, X[prompt:prompt + 1], with_grad=True)
    targets = [c for (i, c) in last.targets if i == prompt]
    n_total = len(last.targets)
    nodes = _inactive(GRPO_ONLY, f"takes no part in a supervised ({st.kind}) stage")
    samples = [{"action": c, "role": TOY_PROMPTS[prompt].role(c), "logp": float(logp[0, c].detach())} for c in targets]
    if targets:
        # This prompt's share of the stage's mean cross-entropy over all its pairs.
        loss = F.nll_loss(logp.expand(len(targets), -1), torch.tensor(targets), reduction="sum") / n_total
        loss.retain_grad()
        loss.backward()
        outputs["output"] = loss
        nodes.update({n: node_record(n, t, NO_GRAD_REASON) for n, t in outputs.items()})
        loss_value = float(loss.detach())
    else:
        nodes.update({n: node_record(n, t.detach(), NO_GRAD_REASON) for n, t in outputs.items()})
        nodes["output"] = NodeRecord.inactive(f"prompt {prompt} has no training example in this stage")
        loss_value = 0.0
    history = _history(run, stage_run, shown=f"the stage's last update, prompt {prompt}'s share of the mean "
                       f"cross-entropy over {n_total} curated pairs", training_pairs_for_prompt=len(targets),
                       student=st.kind == "distill_sft")
    params = GRPOParams(seed=run.seed, prompt=prompt)
    return StepResult(params, "cpu", TOY_PROMPTS[prompt], samples, -loss_value, loss_value, nodes,
                      parameter_grads(policy), history, kind="sft")


def _sampling_step(run: ProcessRun, stage_run: StageRun, prompt: int) -> StepResult:
    st = stage_run.stage
    policy = new_policy(stage_run.start_state)
    outputs, logp = _policy_outputs(policy, X[prompt:prompt + 1], with_grad=False)
    nodes = _inactive(GRPO_ONLY + ["output"], "rejection sampling takes no gradient step")
    for n, t in outputs.items():
        rec = node_record(n, t, NO_GRAD_REASON)
        nodes[n] = NodeRecord(rec.shape, rec.dtype, rec.values, None, "rejection sampling takes no gradient step")
    kept = [c for (i, c) in stage_run.dataset if i == prompt]
    samples = [{"action": c, "role": TOY_PROMPTS[prompt].role(c), "logp": float(logp[0, c]), "kept": True}
               for c in kept]
    history = _history(run, stage_run, shown=f"samples of prompt {prompt} kept by the filter",
                       kept=len(stage_run.dataset), sampled=stage_run.sampled,
                       reward_rule=" + ".join(st.reward))
    return StepResult(GRPOParams(seed=run.seed, prompt=prompt), "cpu", TOY_PROMPTS[prompt], samples, 0.0, 0.0,
                      nodes, {}, history, kind="rejection_sampling")
