"""The tiny-LM walkthrough's step, run for real: sample a group from the shipped base
model, let the policy take `inner_steps` AdamW steps on it (π_old stays the sampler, π_ref the
base), then record one forward and backward pass of `TinyLMGRPO` with every node's value and
gradient keyed by the exported node ids, and take one more step to see which tokens moved.

Deterministic for (params, device): the prompt and the sampling come from `params.seed`
through a CPU generator, and the optimiser is plain AdamW.
"""
from __future__ import annotations

import copy
import pathlib
from functools import lru_cache

import torch

from app.engine.grpo import objective as conv
from app.engine.grpo.gradient_parts import gradient_parts
from app.engine.grpo.token_records import AggregationRow, CompletionRecord, TensorSummary, TokenRecord
from app.engine.grpo.token_step import token_grpo_step
from app.engine.runtime.compute import cached_computation
from app.engine.runtime.records import NodeRecord
from app.engine.runtime.trace import Recording, record_model
from app.kinds.tiny_lm.domain.arith_task import VOCAB, make_prompts
from app.kinds.tiny_lm.domain.arith_task import rewards as reward_parts_of
from app.kinds.tiny_lm.engine.base_training import load_base
from app.kinds.tiny_lm.engine.lm_sampling import Group, sample_group
from app.kinds.tiny_lm.engine.params import MAX_NEW_TOKENS, REWARD_CHOICES, TokenParams
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM
from app.kinds.tiny_lm.engine.tiny_lm_grpo import STATEMENT_MODULES, TinyLMGRPO, build_tiny_lm_grpo
from app.kinds.tiny_lm.engine.token_records import TokenStepResult
from app.kinds.tiny_lm.engine.update_parts import update_parts

BASE_CHECKPOINT = pathlib.Path(__file__).resolve().parents[4] / "walkthroughs" / "models" / "tiny_lm_base.safetensors"
AGGREGATIONS = ("sample_mean", "token_mean", "token_sum_norm")
NO_GRAD_REASON = {
    "old_policy": "frozen: the old policy only supplies log π_old of the sampled tokens",
    "reference_policy": "frozen: the reference only supplies log π_ref",
    "advantages": "rewards are constants: no gradient flows into the advantages",
    "input": "token ids, the mask and the rewards are data, not parameters",
}


@lru_cache(maxsize=4)
def base_model(device: str = "cpu") -> TinyLM:
    """The shipped base checkpoint (sha256-checked), loaded once per device."""
    return load_base(BASE_CHECKPOINT).to(device)


def _rewards(params: TokenParams, prompt, group: Group) -> tuple[list, torch.Tensor]:
    parts = [reward_parts_of(prompt, text) for text in group.completions]
    counted = REWARD_CHOICES[params.reward_parts]
    return parts, torch.tensor([p.total(counted) for p in parts], dtype=torch.float64)


def _policy_after(base: TinyLM, group: Group, rewards: torch.Tensor, params: TokenParams,
                  steps: int) -> tuple[TinyLM, torch.optim.AdamW]:
    """The policy after `steps` AdamW steps of the GRPO loss on this group (μ in DeepSeekMath's
    Algorithm 1), and its optimiser, whose next step is the walkthrough's "update"."""
    policy = copy.deepcopy(base).train()
    policy.requires_grad_(True)
    optimiser = torch.optim.AdamW(policy.parameters(), lr=params.learning_rate, weight_decay=0.0)
    grpo = build_tiny_lm_grpo(base, base, base, params.conventions())
    logp_old = grpo.old_policy(group.ids, group.prompt_length).detach()
    logp_ref = logp_old  # π_ref = π_old = the base here
    c = params.conventions()
    scorer = grpo.policy
    for _ in range(steps):
        scorer.load_state_dict(policy.state_dict())
        optimiser.zero_grad()
        logp = _logp(policy, group)
        token_grpo_step(logp, logp_old, logp_ref, rewards, group.mask, c).loss.backward()
        optimiser.step()
    return policy, optimiser


def _logp(model: TinyLM, group: Group) -> torch.Tensor:
    from app.kinds.tiny_lm.engine.tiny_lm import completion_logprobs
    return completion_logprobs(model, group.ids, group.prompt_length)


def _grad_norm(model: torch.nn.Module) -> float:
    grads = [p.grad.double().flatten() for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0


def _summary(node_id: str, t: torch.Tensor) -> TensorSummary:
    v = t.detach().double()
    finite = v[torch.isfinite(v)]  # attention weights hold no -inf (softmax), but logits may someday
    grad = t.grad if t.requires_grad else None
    reason = None
    if grad is None:
        root = node_id.split("@", 1)[-1].split(".", 1)[0].split("#")[0]
        reason = NO_GRAD_REASON.get(root, "no gradient flows to this tensor")
    return TensorSummary(
        tuple(t.shape), str(t.dtype).removeprefix("torch."),
        float(finite.min()) if finite.numel() else 0.0, float(finite.max()) if finite.numel() else 0.0,
        float(finite.mean()) if finite.numel() else 0.0, float(torch.linalg.vector_norm(finite)),
        None if grad is None else float(torch.linalg.vector_norm(grad.double())),
        None if grad is None else float(grad.abs().max()), reason)


def _reader(recording: Recording, summaries: dict[str, TensorSummary]):
    def read(node_id: str) -> NodeRecord:
        t = recording.values[node_id]
        grad = t.grad if t.requires_grad else None
        return NodeRecord(tuple(t.shape), str(t.dtype).removeprefix("torch."), t.detach().cpu().tolist(),
                          None if grad is None else grad.detach().cpu().tolist(), summaries[node_id].no_grad_reason)
    return read


def _attention_reader(recording: Recording, group: Group):
    lengths = [group.prompt_length + int(m.sum()) - 1 for m in group.mask]  # positions the scorer saw

    def read(block: int, completion: int, head: int) -> list[list[float]]:
        weights = recording.values[f"softmax@policy.blocks.{block}.attention#0"]  # (G, H, L, L)
        n = lengths[completion]
        return weights[completion, head, :n, :n].detach().cpu().tolist()
    return read


def _aggregation_rows(logp: torch.Tensor, logp_old, logp_ref, rewards, mask, params: TokenParams,
                      policy: TinyLM, group: Group) -> tuple[AggregationRow, ...]:
    """The same group under each aggregation: loss, ‖∇θ‖ and each completion's push Σ|∂loss/∂logp|."""
    rows = []
    for mode in AGGREGATIONS:
        c = params.conventions().model_copy(update={"loss_aggregation": mode})
        leaf = logp.detach().clone().requires_grad_(True)
        step = token_grpo_step(leaf, logp_old, logp_ref, rewards, mask, c)
        step.loss.backward()
        assert leaf.grad is not None
        policy.zero_grad()
        full = _logp(policy, group)
        torch.autograd.backward(full, leaf.grad)  # chain rule: ∂loss/∂θ = Σ ∂loss/∂logp · ∂logp/∂θ
        norm = _grad_norm(policy)
        rows.append(AggregationRow(mode, float(step.loss.detach()), norm,
                                   tuple(float(v) for v in leaf.grad.abs().sum(-1))))
    policy.zero_grad()
    return tuple(rows)


def run_token_step(params: TokenParams, device: str = "cpu") -> TokenStepResult:
    return _cached(params, device)


# Misses run under the one compute limit every kind shares (engine/runtime/compute.py).
@cached_computation(maxsize=32)
def _cached(params: TokenParams, device: str) -> TokenStepResult:
    base = base_model(device)
    prompt = make_prompts(1, params.seed)[0]
    from app.kinds.tiny_lm.domain.arith_task import encode
    group = sample_group(base, encode(prompt.text), params.group_size, MAX_NEW_TOKENS, params.seed)
    parts, rewards = _rewards(params, prompt, group)
    rewards = rewards.to(device)
    policy, optimiser = _policy_after(base, group, rewards, params, params.inner_steps)

    grpo = build_tiny_lm_grpo(policy, base, base, params.conventions())
    recording = record_model(grpo, (group.ids, group.mask, rewards, group.prompt_length),
                             select_output=lambda out: out["loss"], statement_modules=STATEMENT_MODULES)
    out = recording.result
    out["loss"].backward()
    logp_leaf = recording.values["policy.token_logprobs"]
    grad_logp = logp_leaf.grad if logp_leaf.grad is not None else torch.zeros_like(logp_leaf)
    summaries = {nid: _summary(nid, t) for nid, t in recording.values.items()}
    policy_grad_norm = _grad_norm(grpo.policy)

    # The same group under each aggregation, on the policy as recorded (before the update below).
    aggregations = _aggregation_rows(out["logp"], out["logp_old"].detach(), out["logp_ref"].detach(), rewards,
                                     group.mask, params, copy.deepcopy(policy), group)
    logp_old, logp_ref = out["logp_old"].detach(), out["logp_ref"].detach()
    grad_surrogate, grad_kl = _gradient_parts(grpo, group, rewards)
    # Why each completion moved: the same update on parts of the loss (before the real one below).
    parts_moved = update_parts(policy, optimiser, lambda m: _logp(m, group), logp_old, logp_ref, rewards,
                               group.mask, params.conventions())
    # The update: the policy's next AdamW step on the same loss, then the same tokens scored again.
    optimiser.zero_grad()
    logp_before = _logp(policy, group)
    token_grpo_step(logp_before, out["logp_old"].detach(), out["logp_ref"].detach(), rewards, group.mask,
                    params.conventions()).loss.backward()
    optimiser.step()
    with torch.no_grad():
        logp_after = _logp(policy, group)

    weights_by_mode = {m: conv.aggregation_weights(group.mask, m, params.max_length) for m in AGGREGATIONS}
    completions = _completions(group, parts, rewards, out, grad_logp, logp_after, weights_by_mode,
                               (grad_surrogate, grad_kl))
    return TokenStepResult(
        params, device, prompt.text, tuple(VOCAB[int(i)] for i in group.ids[0, :group.prompt_length]),
        prompt.script, prompt.answer, REWARD_CHOICES[params.reward_parts], completions,
        float(out["objective"].detach()), float(out["loss"].detach()), policy_grad_norm, aggregations, summaries,
        _reader(recording, summaries), _attention_reader(recording, group),
        tuple(tuple(row[:c.length]) for row, c in zip(grad_kl.cpu().tolist(), completions, strict=True)),
        parts_moved)


def _gradient_parts(grpo: TinyLMGRPO, group: Group, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """∂loss/∂log π per token, split into its surrogate and KL parts by autograd, on a fresh forward pass
    of the same objective module (the recorded pass's tensors retain .grad, which autograd.grad adds to)."""
    out = grpo(group.ids, group.mask, rewards, group.prompt_length)
    return gradient_parts(out["loss_parts"], out["logp"])


def _completions(group: Group, parts, rewards, out, grad_logp, logp_after, weights_by_mode, grad_parts) -> tuple:
    rows = []
    columns = {k: out[k].detach().cpu().tolist() for k in
               ("logp", "logp_old", "logp_ref", "ratio", "kl", "kl_term", "per_token", "weights",
                "clip_active", "dual_clip_hit")}
    grads, after = grad_logp.detach().cpu().tolist(), logp_after.cpu().tolist()
    from_surrogate, from_kl = (g.cpu().tolist() for g in grad_parts)
    for i, text in enumerate(group.completions):
        n = int(group.mask[i].sum())
        ids = group.ids[i, group.prompt_length:group.prompt_length + n]
        tokens = tuple(TokenRecord(
            VOCAB[int(ids[t])], columns["logp"][i][t], columns["logp_old"][i][t], columns["logp_ref"][i][t],
            columns["ratio"][i][t], bool(columns["clip_active"][i][t]), bool(columns["dual_clip_hit"][i][t]),
            columns["kl"][i][t], columns["kl_term"][i][t], columns["per_token"][i][t], columns["weights"][i][t],
            grads[i][t], after[i][t], from_surrogate[i][t], from_kl[i][t]) for t in range(n))
        contribution = sum(tok.weight * tok.objective for tok in tokens)
        rows.append(CompletionRecord(
            text, tokens, parts[i].accuracy, parts[i].format, parts[i].language, float(rewards[i]),
            float(out["reward_used"][i]), float(out["advantages"][i]), contribution,
            {m: float(w[i, 0]) for m, w in weights_by_mode.items()}))
    return tuple(rows)


__all__ = ["AGGREGATIONS", "BASE_CHECKPOINT", "TinyLMGRPO", "base_model", "run_token_step"]
