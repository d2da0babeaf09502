"""The real model's step as a job (app/engine/jobs): one step per parameter set, computed by a runner.

A step takes tens of seconds on two CPU cores, so no web worker ever runs it: a POST queues it (or the
server at start-up, for the default parameters), the runner process computes it with its one copy of
the weights (checkpoint.load, once per process), and every page reads the stored result. The job's
params are the step's whole identity: the validated SmolParams (every field, so two spellings of one
step are one job) and the device.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.engine.grpo.token_records import TensorSummary, TokenRecord
from app.engine.jobs.tasks import Progress
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.engine.step_records import HeadNode, Rows, SmolCompletion, SmolStepResult, TokenMove, WideNode

TASK = "smollm_step"
TYPES = (SmolStepResult, SmolCompletion, HeadNode, WideNode, Rows, TokenMove, TensorSummary, TokenRecord, SmolParams)

# Each stage's share of a step's time (measured on two CPU cores and two threads, G 8 x 48 tokens:
# 6.9, 2.9, 9.1, 5.7, 4.7, 0.4, 1.5 s), so the page's progress bar moves evenly; the stage names are
# run_smol_step's progress calls, each weighing the time up to its report.
STAGE_WEIGHTS = {"sampling": 22, "old policy": 9, "inner step": 29, "forward": 18, "backward": 15,
                 "summaries": 2, "update": 5}
TOTAL_WEIGHT = sum(STAGE_WEIGHTS.values())
ORDER = tuple(STAGE_WEIGHTS)


def step_params(params: SmolParams, device: str) -> dict[str, Any]:
    return {"step": params.model_dump(mode="json"), "device": device}


def params_of(job_params: Mapping[str, Any]) -> SmolParams:
    return SmolParams(**job_params["step"])


def progress_adapter(progress: Progress) -> Callable[[str, int, int], None]:
    """run_smol_step's (stage, done, total) as the runner's (stage, step, steps done, total) in weight units."""
    def report(stage: str, done: int, total: int) -> None:
        before = sum(STAGE_WEIGHTS[s] for s in ORDER[:ORDER.index(stage)]) if stage in STAGE_WEIGHTS else 0
        share = STAGE_WEIGHTS.get(stage, 0) * (done / total if total else 1.0)
        progress(stage, done, int(before + share), TOTAL_WEIGHT)
    return report


def run_step(job_params: Mapping[str, Any], progress: Progress, data_dir: Path) -> SmolStepResult:
    from app.engine.runtime.device import intra_op_threads
    from app.kinds.smollm.engine import checkpoint
    from app.kinds.smollm.engine.step import run_smol_step
    from app.kinds.smollm.engine.threads import job_threads

    loaded = checkpoint.load(data_dir)
    with intra_op_threads(job_threads()):
        return run_smol_step(params_of(job_params), loaded, str(job_params["device"]),
                             progress=progress_adapter(progress))


def title(job_params: Mapping[str, Any]) -> str:
    p = job_params["step"]
    return (f"SmolLM2 step: prompt {p['prompt']}, G {p['group_size']} x {p['max_new_tokens']} tokens, "
            f"seed {p['seed']} ({job_params['device']})")


def payload(job_params: Mapping[str, Any], result: SmolStepResult) -> dict[str, Any]:
    """The paths API's `result`: the group's numbers, the loss and where the gradient landed."""
    return {"prompt": result.prompt_text, "completions": [
                {"text": c.text, "reward": c.reward, "reward_parts": c.reward_parts, "advantage": c.advantage,
                 "length": c.length, "stopped": c.stopped} for c in result.completions],
            "loss": result.loss, "loss_surrogate": result.loss_surrogate, "loss_kl": result.loss_kl,
            "block_grad_norms": list(result.block_grad_norms), "stage_seconds": result.stage_seconds,
            "peak_rss_mb": result.peak_rss_mb}
