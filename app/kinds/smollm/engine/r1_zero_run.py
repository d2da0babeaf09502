"""DeepSeek-R1-Zero's recipe on the real model (issue 33): GRPO straight from the checkpoint with rule
rewards only (arXiv 2501.12948 §2.2), for `steps` steps over the built-in prompts.

Step s:
1. the current policy answers prompt s mod 6 G times (seed + s, KV-cached, one sampling thread);
2. each answer is scored by the prompt's rules (domain/tasks.py: accuracy + brevity). R1-Zero's own
   format reward pays for <think>/<answer> tags, which this model never writes (0 of 8 answers asked
   for them, issue 33's facts): every group would tie on it and get A = 0, so the prompt's own
   requested format (a short reply) stands in for it;
3. the reference (the checkpoint, frozen) scores the answers; the policy scores them with gradients
   (both through ScoredDecoder.score: the prompt once, the LM head on the answers' positions only), from
   logits / the sampling temperature, as the single step and TRL's _get_per_token_logps_and_entropies do;
   π_old is the policy that sampled (num_iterations = 1, TRL's default), so ρ = 1 and no clip fires;
4. one AdamW step of the shared token GRPO loss (app/engine/grpo/token_step.py, every convention). The
   optimiser keeps this run's own documented choice (run_params.py: lr 1e-5, no gradient clipping), not the
   single step's TRL defaults; the log-probs follow the same convention as the step's.

What each step logs is measured on that step's group before its update: the rewards and their parts,
the answers' lengths, how many stopped by themselves, the KL to the reference per token (the loss's
estimator, 0 at step 0 since the policy starts as the reference), whether the group tied (every
advantage 0: no signal), the loss and ‖∂loss/∂θ‖. Plain numbers only in the result (run_records.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from app.engine.grpo.token_step import token_grpo_step
from app.engine.lm.sampling import sample_group
from app.kinds.smollm.domain.tasks import TASKS, Task
from app.kinds.smollm.engine.checkpoint import LoadedModel
from app.kinds.smollm.engine.prompts import prompt_ids
from app.kinds.smollm.engine.run_params import SmolRunParams
from app.kinds.smollm.engine.run_records import RunAnswer, RunPoint, SmolRunResult
from app.kinds.smollm.engine.step import build_objective, policy_of, scorer

# (stage, step index, steps) -> None: "sampling" at step 3 of 20, ...
RunProgress = Callable[[str, int, int], None]
STAGES = ("sampling", "scoring", "update")


def _quiet(stage: str, step: int, steps: int) -> None:
    return None


def run_r1_zero(params: SmolRunParams, loaded_model: LoadedModel, device: str = "cpu", *,
                progress: RunProgress | None = None, tasks: Sequence[Task] = TASKS) -> SmolRunResult:
    report = progress or _quiet
    model = loaded_model.model
    if next(model.parameters()).device != torch.device(device):
        import copy
        model = copy.deepcopy(model).to(device)  # a copy: the process's one checkpoint stays where it is
    c = params.conventions()
    started_run = time.perf_counter()
    # policy: a trainable copy; old and reference: the checkpoint's tensors; log-probs at the sampling temperature
    grpo = build_objective(model, c, params.temperature)
    policy, reference = policy_of(grpo), grpo.reference_policy
    optimiser = torch.optim.AdamW(policy.parameters(), lr=params.learning_rate, weight_decay=0.0)
    points: list[RunPoint] = []
    prompts = [prompt_ids(loaded_model, task) for task in tasks]
    for s in range(params.steps):
        started = time.perf_counter()
        task, prompt = tasks[s % len(tasks)], prompts[s % len(tasks)]
        report("sampling", s, params.steps)
        group = sample_group(loaded_model, policy, prompt, params.group_size, params.max_new_tokens,
                                  params.temperature, params.seed + s)
        report("scoring", s, params.steps)
        parts = [task.score(text) for text in group.texts]
        rewards = torch.tensor([sum(p.values()) for p in parts], dtype=group.mask.dtype, device=group.ids.device)
        with torch.no_grad():
            logp_ref = scorer(reference).score(group.ids, group.prompt_length)
        report("update", s, params.steps)
        optimiser.zero_grad(set_to_none=True)
        logp = policy.score(group.ids, group.prompt_length)
        out = token_grpo_step(logp, logp.detach(), logp_ref, rewards, group.mask, c)
        out.loss.backward()
        grad_norm = float(torch.stack([p.grad.double().pow(2).sum() for p in policy.parameters()
                                       if p.grad is not None]).sum().sqrt())
        optimiser.step()
        points.append(_point(s, task, group, parts, rewards, out, grad_norm, time.perf_counter() - started))
    del grpo, optimiser
    return SmolRunResult(params=params, device=str(device), task_names=tuple(t.name for t in tasks),
                         points=tuple(points), seconds=round(time.perf_counter() - started_run, 3),
                         load_seconds=loaded_model.load_seconds)


def _point(s: int, task: Task, group, parts: list[dict[str, float]], rewards: torch.Tensor, out, grad_norm: float,
           seconds: float) -> RunPoint:
    mask = group.mask
    real = mask.sum()
    lengths = mask.sum(-1)
    reward_list = [float(r) for r in rewards.tolist()]
    part_names = list(parts[0]) if parts else []
    answers = tuple(RunAnswer(text, reward, float(a), int(n), stopped)
                    for text, reward, a, n, stopped in zip(group.texts, reward_list, out.advantages.tolist(),
                                                           lengths.tolist(), group.stopped, strict=True))
    return RunPoint(
        step=s, task_name=task.name,
        reward_mean=sum(reward_list) / len(reward_list),
        part_means={name: sum(p[name] for p in parts) / len(parts) for name in part_names},
        tied=len(set(reward_list)) == 1,
        length_mean=float(lengths.mean()),
        stopped_share=sum(group.stopped) / len(group.stopped),
        kl_mean=float((out.kl.detach() * mask).sum() / real) if float(real) > 0 else 0.0,
        clip_share=float((out.clip_active.to(mask.dtype) * mask).sum() / real) if float(real) > 0 else 0.0,
        loss=float(out.loss.detach()), grad_norm=grad_norm, seconds=round(seconds, 3), answers=answers)


__all__ = ["STAGES", "RunProgress", "run_r1_zero"]
