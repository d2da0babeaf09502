"""The live GRPO step on the real model (issue 33): SmolLM2-135M-Instruct answers one built-in prompt.

1. sample G completions of the chat-formatted prompt from the checkpoint (π_old), seeded, at the
   temperature asked for, KV-cached (Decoder.generate);
2. score them with the prompt's rule rewards (domain/tasks.py: each named part, then their sum);
3. build SmolLMGRPO with old = reference = the checkpoint (their tensors shared, engine/smollm_grpo.py)
   and the policy a copy, every copy's log-probs read from logits / temperature (TRL's
   _get_per_token_logps_and_entropies reads them from its fused LM head at `temperature`, verl's actor
   divides by it: see TokenLogProbs), and take μ − 1
   AdamW steps of the GRPO loss on the group: the recorded step is TRL's μ-th iteration (num_iterations),
   so at μ = 1 (TRL's default) π = π_old and every ρ is 1, at μ > 1 ρ ≠ 1;
4. record ONE forward and backward of the objective with the tracer (engine/runtime/trace.py): every
   node's value and ∂loss/∂node, under the ids the exported graph gives them; reduce them to what can
   ship (step_records.py): the head in full, every block-level node per token × width, block
   `attention_block`'s attention weights per head, ‖∂loss/∂W‖ per block, and the loss's surrogate and
   KL parts (engine/grpo/gradient_parts.py). The reference's forward is not run here: it is the old
   policy's twin (reference_read_from_old), so its nodes take the old policy's summaries;
5. take the recorded step's AdamW step with its gradients and score the same tokens again: which
   log-probs moved most.

The optimiser is TRL's by default, as transformers' Trainer builds it from GRPOConfig: AdamW (lr 1e-6,
betas (0.9, 0.999), eps 1e-8, weight decay 0) and, before each of its steps, the policy's gradient scaled
to an L2 norm of at most max_grad_norm = 1 (transformers 5.10.4 Trainer's inner loop: `if
self.args.max_grad_norm > 0: grad_norm = self._clip_grad_norm(model)`, which is accelerate's
clip_grad_norm_(model.parameters(), max_grad_norm)); the norm before clipping is reported, as Trainer logs
`grad_norm`.

The passes nobody records (log π_old, the inner steps, log π after the update) go through
ScoredDecoder.score: the group's one prompt read once and the LM head on the scored positions only, the
same numbers as the recorded forward up to float rounding at about half its cost (the prompt is ~42 of
~90 tokens). On two cores and two threads (engine/threads.py) G 8 x 48 tokens took 29.5-31.5 s
(42.9 s on one thread; 54.6 s on one before these three changes).

Deterministic for (params, model, device): one seeded generator draws every token, AdamW is plain.
Memory: the checkpoint is the caller's (checkpoint.load keeps one per process); the step adds the
policy's copy, its gradients and AdamW's two moments (4 x 538 MB in float32) and the recording, which
holds no node longer than its summary needs (node_summaries.py): the frozen copies' nodes are summarised
as the forward makes them, the policy's as the backward reaches them. So "record" includes most of the
summaries' work. Peak RSS for G = 8 x 48 tokens: 8.9 GB before, 4.7 GB after.
Sampling runs on one intra-op thread (sampling.py); the other stages on the caller's torch threads.
"""
from __future__ import annotations

import resource
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import cast

import torch

from app.engine.grpo.gradient_parts import gradient_parts
from app.engine.grpo.params import Conventions
from app.engine.grpo.token_objective import STATEMENT_MODULES
from app.engine.grpo.token_step import token_grpo_step, token_loss_parts
from app.engine.lm.decoder import Decoder
from app.engine.lm.sampling import Progress, SampledGroup, no_progress, sample_group
from app.engine.runtime.trace import record_model
from app.kinds.smollm.domain.tasks import TASKS, Task
from app.kinds.smollm.engine.checkpoint import LoadedModel
from app.kinds.smollm.engine.node_summaries import NodeSummaries, attention_of
from app.kinds.smollm.engine.optimiser import adamw, block_grad_norms, clip_gradient, gradient_norm
from app.kinds.smollm.engine.params import SmolParams, default_attention_block
from app.kinds.smollm.engine.prompts import prompt_ids, task_of
from app.kinds.smollm.engine.smollm_grpo import ScoredDecoder, SmolLMGRPO, share_weights
from app.kinds.smollm.engine.step_records import SmolStepResult
from app.kinds.smollm.engine.step_tables import completion_records, moved_most, token_text


def policy_of(grpo: SmolLMGRPO) -> ScoredDecoder:
    return cast(ScoredDecoder, grpo.policy)


def scorer(copy: torch.nn.Module) -> ScoredDecoder:
    return cast(ScoredDecoder, copy)


def build_objective(model: Decoder, conventions: Conventions, temperature: float = 1.0) -> SmolLMGRPO:
    """SmolLMGRPO with the policy a trainable copy of `model` and old = reference = `model`'s own tensors,
    each scoring log-softmax(logits / temperature) (the sampler's temperature: TRL's convention).
    Built on the meta device first: three random inits of 135M parameters (~8 s) would be thrown away."""
    parameter = next(model.parameters())
    with torch.device("meta"):
        grpo = SmolLMGRPO(model.cfg, conventions, temperature)
    policy = policy_of(grpo)
    policy.to_empty(device=parameter.device)
    policy.to(parameter.dtype)
    if model.cfg.tie_embeddings:  # to_empty gives each of the tied names a tensor of its own: tie them again
        policy.lm_head.weight = policy.embed.weight
    policy.load_state_dict(model.state_dict())
    for copy in (grpo.old_policy, grpo.reference_policy):
        share_weights(copy, model)
    for scorer in (grpo.policy, grpo.old_policy, grpo.reference_policy):
        scorer.inverse_frequencies = model.inverse_frequencies.clone()
    policy.requires_grad_(True)
    assert policy.lm_head.weight is policy.embed.weight or not model.cfg.tie_embeddings
    assert not any(t.is_meta for t in (*grpo.parameters(), *grpo.buffers())), "a tensor was left on the meta device"
    return grpo


def same_tensors(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Whether two copies compute the same thing: every parameter the same storage, every buffer equal."""
    params_a, params_b = list(a.named_parameters()), list(b.named_parameters())
    buffers_a, buffers_b = list(a.named_buffers()), list(b.named_buffers())
    return (len(params_a) == len(params_b) and len(buffers_a) == len(buffers_b)
            and all(na == nb and pa.shape == pb.shape and pa.data_ptr() == pb.data_ptr()
                    for (na, pa), (nb, pb) in zip(params_a, params_b, strict=True))
            and all(na == nb and torch.equal(ba, bb) for (na, ba), (nb, bb) in zip(buffers_a, buffers_b, strict=True)))


@contextmanager
def reference_read_from_old(grpo: SmolLMGRPO, nodes: NodeSummaries) -> Iterator[None]:
    """In the recorded pass, the reference's forward is not run when it is the old policy's twin (both the
    checkpoint's tensors, as at every live step): it would repeat, op for op on the same input, the old
    policy's forward just before it (a third of the recorded forward's time). Its nodes take the old
    policy's summaries under their own ids (NodeSummaries.twin) and log π_ref is log π_old's copy: the same
    numbers a run would give, bit for bit (the tests run both ways)."""
    reference = grpo.reference_policy
    if not same_tensors(reference, grpo.old_policy):
        yield
        return

    def forward(ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
        nodes.twin("old_policy", "reference_policy")
        return nodes.outputs["old_policy"].detach().clone()  # (G, T)

    reference.forward = forward
    try:
        yield
    finally:
        del reference.forward


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _validated(params: SmolParams, prompt_length: int, model: Decoder) -> None:
    """The bounds only the model knows: prompt + max_new_tokens within the context, the block kept exists."""
    SmolParams.model_validate(params.model_dump(), context={
        "prompt_tokens": {params.prompt: prompt_length}, "context_length": model.cfg.context_length,
        "n_layer": model.cfg.n_layer})


def run_smol_step(params: SmolParams, loaded_model: LoadedModel, device: str = "cpu", *,
                  progress: Progress | None = None, tasks: Sequence[Task] = TASKS) -> SmolStepResult:
    """One recorded GRPO step of the checkpoint `loaded_model` (checkpoint.load's) on `params.prompt`."""
    report = progress or no_progress
    times: dict[str, float] = {}
    rss_before = _rss_mb()
    task = task_of(params, tasks)
    model = loaded_model.model
    if next(model.parameters()).device != torch.device(device):
        model = _moved(model, device)  # a copy: the process's one checkpoint stays where it was loaded
    prompt = prompt_ids(loaded_model, task)
    _validated(params, len(prompt), model)
    c = params.conventions()

    started = time.perf_counter()
    group = sample_group(loaded_model, model, prompt, params.group_size, params.max_new_tokens,
                              params.temperature, params.seed, report)
    times["sampling"] = time.perf_counter() - started

    started = time.perf_counter()
    parts = [task.score(text) for text in group.texts]
    dtype = group.mask.dtype
    rewards = torch.tensor([sum(p.values()) for p in parts], dtype=dtype, device=group.ids.device)
    grpo = build_objective(model, c, params.temperature)
    logp_old: torch.Tensor | None = None
    if params.inner_steps > 1:  # the earlier iterations need log π_old before the recorded pass
        with torch.no_grad():
            logp_old = scorer(grpo.old_policy).score(group.ids, group.prompt_length)  # (G, T): π_old = π_ref
    report("old policy", 1, 1)
    times["scoring"] = time.perf_counter() - started

    started = time.perf_counter()
    optimiser = adamw(policy_of(grpo), params)
    earlier = () if logp_old is None else _earlier_iterations(grpo, optimiser, params, group, rewards, logp_old,
                                                              logp_old, report)
    times["inner steps"] = time.perf_counter() - started

    started = time.perf_counter()
    optimiser.zero_grad(set_to_none=True)
    report("forward", 0, 1)
    positions = torch.cat([torch.ones_like(group.mask[:, :1]).expand(-1, group.prompt_length),
                           group.mask[:, :-1]], dim=1).bool()  # (G, L - 1): the scored positions that are real
    attention_block = (params.attention_block if params.attention_block is not None
                       else default_attention_block(model.cfg.n_layer))
    attention_id = f"softmax@policy.blocks.{attention_block}.attention#0"
    nodes = NodeSummaries(positions, keep=frozenset({attention_id}))  # each node summarised as soon as it can be
    with reference_read_from_old(grpo, nodes):
        recording = record_model(grpo, (group.ids, group.mask, rewards, group.prompt_length),
                                 select_output=lambda out: out["loss"], statement_modules=STATEMENT_MODULES,
                                 keep_value=nodes.take)
    out = recording.result
    nodes.watch(recording.values)
    report("backward", 0, 1)
    out["loss"].backward()
    if logp_old is None:
        # μ = 1: π_old's log-probs are the recorded pass's own old-policy scores (TRL, num_iterations 1, takes
        # the policy's detached log-probs as old_per_token_logps the same way): no pass of its own
        logp_old = out["logp_old"].detach()
    logp_ref = logp_old  # the reference is the old policy's twin at a walkthrough's first step
    times["record"] = time.perf_counter() - started
    report("backward", 1, 1)

    started = time.perf_counter()
    head, wide = nodes.finish(recording.values)
    attention = attention_of(recording.values[attention_id], group.mask, group.prompt_length)
    blocks, others, total = block_grad_norms(policy_of(grpo))
    logp_recorded = out["logp"].detach()
    leaf = logp_recorded.clone().requires_grad_(True)
    split = token_loss_parts(token_grpo_step(leaf, logp_old, logp_ref, rewards, group.mask, c), group.mask, c)
    grad_surrogate, grad_kl = gradient_parts(split, leaf)
    loss_parts = out["loss_parts"]
    columns = {k: out[k].detach() for k in ("ratio", "kl", "kl_term", "per_token", "weights", "clip_active",
                                            "dual_clip_hit", "reward_used", "advantages")}
    objective, loss = float(out["objective"].detach()), float(out["loss"].detach())
    logp_grad = recording.values["policy.token_logprobs"].grad
    grad_logp = torch.zeros_like(logp_recorded) if logp_grad is None else logp_grad.detach()
    del recording, out
    times["summaries"] = time.perf_counter() - started
    report("summaries", 1, 1)

    started = time.perf_counter()
    grad_norm = clip_gradient(policy_of(grpo), params.max_grad_norm)  # as Trainer, before the optimiser's step
    clipped_norm = gradient_norm(policy_of(grpo))
    optimiser.step()  # the recorded loss's gradients: the update the walkthrough shows next
    with torch.no_grad():
        logp_after = policy_of(grpo).score(group.ids, group.prompt_length)
    times["update"] = time.perf_counter() - started
    report("update", 1, 1)

    completions = completion_records(loaded_model, group, parts, rewards, logp_recorded, logp_old, logp_ref, columns,
                               grad_logp, (grad_surrogate, grad_kl), logp_after)
    moved = moved_most(completions)
    temperature = policy_of(grpo).temperature
    del grpo, optimiser
    return SmolStepResult(
        params=params, device=str(device), dtype=str(dtype).removeprefix("torch."), task_name=task.name,
        prompt_text=task.text, prompt_tokens=tuple(token_text(loaded_model, t) for t in prompt),
        reward_rules={part.name: part.pays for part in task.parts}, completions=completions,
        objective=objective, loss=loss, loss_surrogate=float(loss_parts.surrogate.detach()),
        loss_kl=float(loss_parts.kl.detach()), head=head, wide=wide, attention_block=attention_block,
        attention=attention, block_grad_norms=blocks, other_grad_norms=others, policy_grad_norm=total, moved=moved,
        stage_seconds={k: round(v, 3) for k, v in times.items()}, rss_before_mb=rss_before,
        peak_rss_mb=_peak_rss_mb(), ids=group.ids.tolist(), mask=group.mask.tolist(),
        prompt_length=group.prompt_length, logprob_temperature=temperature,
        grad_norm_before_clip=grad_norm, grad_norm_after_clip=clipped_norm, earlier_grad_norms=earlier)


def _earlier_iterations(grpo: SmolLMGRPO, optimiser: torch.optim.Optimizer, params: SmolParams,
                        group: SampledGroup, rewards: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor,
                        report: Progress) -> tuple[float, ...]:
    """TRL's iterations 1 … μ − 1 on this group (GRPOTrainer reuses a generation num_iterations times): each
    a GRPO loss on the same samples, its gradient clipped, one AdamW step. Returns each gradient's norm
    before clipping. None at μ = 1: the recorded step is then the first, with π = π_old."""
    c, policy, norms = params.conventions(), policy_of(grpo), []
    for step in range(params.inner_steps - 1):
        optimiser.zero_grad(set_to_none=True)
        logp = policy.score(group.ids, group.prompt_length)
        token_grpo_step(logp, logp_old, logp_ref, rewards, group.mask, c).loss.backward()
        norms.append(clip_gradient(policy, params.max_grad_norm))
        optimiser.step()
        report("inner step", step + 1, params.inner_steps - 1)
    return tuple(norms)


def _moved(model: Decoder, device: str) -> Decoder:
    import copy
    return copy.deepcopy(model).to(device)


__all__ = ["Progress", "SampledGroup", "block_grad_norms", "build_objective", "prompt_ids", "run_smol_step",
           "sample_group"]
