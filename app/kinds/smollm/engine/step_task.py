"""The real model's step as a job (app/engine/jobs): one step per parameter set, computed by a runner.

A step takes tens of seconds on two CPU cores, so no web worker ever runs it: a POST queues it (or the
server at start-up, for the default parameters), the runner process computes it with its one copy of
the weights (checkpoint.load, once per process), and every page reads the stored result. The job's
params are the step's whole identity: the validated SmolParams (every field, so two spellings of one
step are one job) and the device.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from app.engine.grpo.token_records import TensorSummary, TokenRecord
from app.engine.jobs.tasks import Job, JobParams, Progress
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.engine.step_records import HeadNode, Rows, SmolCompletion, SmolStepResult, TokenMove, WideNode

TASK = "smollm_step"
TYPES = (SmolStepResult, SmolCompletion, HeadNode, WideNode, Rows, TokenMove, TensorSummary, TokenRecord, SmolParams)

# Each stage's share of a step's time (measured on two CPU cores and two threads, G 8 x 48 tokens:
# 6.9, 2.9, 9.1 for two inner steps, 5.7, 4.7, 0.4, 1.5 s), so the page's progress bar moves evenly; the
# stage names are run_smol_step's progress calls, each weighing the time up to its report. "inner step" weighs
# per step: a step takes μ − 1 of them (none at μ = 1, TRL's default), and at μ = 1 log π_old is read from the
# recorded pass, so "old policy" weighs nothing then either.
STAGE_WEIGHTS = {"sampling": 22, "old policy": 9, "inner step": 15, "forward": 18, "backward": 15,
                 "summaries": 2, "update": 5}
ORDER = tuple(STAGE_WEIGHTS)


def stage_weights(inner_steps: int) -> dict[str, int]:
    return {**STAGE_WEIGHTS, "old policy": STAGE_WEIGHTS["old policy"] if inner_steps > 1 else 0,
            "inner step": STAGE_WEIGHTS["inner step"] * (inner_steps - 1)}


class SmolStepJob(JobParams):
    """The step's job: the validated SmolParams (every field, so two spellings of one step are one job), the
    device, and an added model's GGUF file (none: the default model)."""
    task: ClassVar[str] = TASK
    step: SmolParams
    device: str
    model: str | None = None

    @property
    def model_path(self) -> Path | None:
        return Path(self.model) if self.model else None


def step_params(params: SmolParams, device: str, model: Path | None = None) -> SmolStepJob:
    return SmolStepJob(step=params, device=device, model=str(model) if model else None)


def step_job(params: SmolParams, device: str, model: Path | None = None) -> Job:
    return step_params(params, device, model).job()


def progress_adapter(progress: Progress, inner_steps: int = 1) -> Callable[[str, int, int], None]:
    """run_smol_step's (stage, done, total) as the runner's (stage, step, steps done, total) in weight units."""
    weights = stage_weights(inner_steps)
    total_weight = sum(weights.values())

    def report(stage: str, done: int, total: int) -> None:
        before = sum(weights[s] for s in ORDER[:ORDER.index(stage)]) if stage in weights else 0
        share = weights.get(stage, 0) * (done / total if total else 1.0)
        progress(stage, done, int(before + share), total_weight)
    return report


def run_step(job: SmolStepJob, progress: Progress, data_dir: Path) -> SmolStepResult:
    from app.engine.runtime.device import intra_op_threads
    from app.kinds.smollm.engine import checkpoint
    from app.kinds.smollm.engine.step import run_smol_step
    from app.kinds.smollm.engine.threads import job_threads

    loaded = checkpoint.load(data_dir, job.model_path)
    with intra_op_threads(job_threads()):
        return run_smol_step(job.step, loaded, job.device, progress=progress_adapter(progress, job.step.inner_steps))


def title(job: SmolStepJob) -> str:
    p = job.step
    asked = f"your question {_shorten(p.prompt_text)!r}" if p.prompt_text else f"prompt {p.prompt}"
    model = job.model_path
    return (f"{model.stem if model else 'SmolLM2'} step: {asked}, G {p.group_size} x {p.max_new_tokens} tokens, "
            f"seed {p.seed} ({job.device})")


def _shorten(text: str, limit: int = 40) -> str:
    """A typed question in a job's one-line title: its first line, at most `limit` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def payload(job: SmolStepJob, result: SmolStepResult) -> dict[str, Any]:
    """The API's `result`: the resolved parameters and optimiser, the group (ids, masks, every token's
    numbers), the loss, where the gradient landed and what the update moved."""
    return {"prompt": result.prompt_text, "params": result.params.model_dump(mode="json"),
            "conventions": result.params.conventions().model_dump(mode="json"),
            "logprob_temperature": result.logprob_temperature, "optimizer": optimizer_settings(result),
            "prompt_length": result.prompt_length, "prompt_tokens": list(result.prompt_tokens),
            "ids": result.ids, "mask": result.mask,
            "completions": [_completion(c) for c in result.completions],
            "objective": result.objective, "loss": result.loss, "loss_surrogate": result.loss_surrogate,
            "loss_kl": result.loss_kl, "block_grad_norms": list(result.block_grad_norms),
            "other_grad_norms": dict(result.other_grad_norms), "policy_grad_norm": result.policy_grad_norm,
            "grad_norm": {"before_clip": result.grad_norm_before_clip, "after_clip": result.grad_norm_after_clip,
                          "earlier_iterations_before_clip": list(result.earlier_grad_norms)},
            "attention_block": result.attention_block,
            "moved": [{"completion": m.completion, "position": m.position, "token": m.token,
                       "logp_before": m.logp_before, "logp_after": m.logp_after, "delta": m.delta}
                      for m in result.moved],
            "stage_seconds": result.stage_seconds, "peak_rss_mb": result.peak_rss_mb}


def optimizer_settings(result: SmolStepResult) -> dict[str, Any]:
    """The optimiser the step ran (engine/step.py adamw, clip_gradient), in TRL's GRPOConfig names."""
    p = result.params
    assert isinstance(p, SmolParams)
    return {"name": "AdamW", "learning_rate": p.learning_rate, "betas": [p.adam_beta1, p.adam_beta2],
            "eps": p.adam_epsilon, "weight_decay": p.weight_decay, "max_grad_norm": p.max_grad_norm,
            "num_iterations": p.inner_steps, "steps_before_recorded": p.inner_steps - 1}


def _completion(c: SmolCompletion) -> dict[str, Any]:
    return {"text": c.text, "token_ids": list(c.token_ids), "reward": c.reward, "reward_parts": c.reward_parts,
            "reward_used": c.reward_used, "advantage": c.advantage, "length": c.length, "stopped": c.stopped,
            "tokens": [{**vars(t), "delta_logp": t.delta_logp} for t in c.tokens]}
