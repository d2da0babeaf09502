"""The real model's R1-Zero run as a job (app/engine/jobs): minutes of CPU, so only a POST queues it and
the runner of the kind's lane computes it with its one copy of the weights (checkpoint.load); pages and
the paths API read the stored result. R1 and distillation are not offered on this model (their cold start
and teacher would be runs of their own; the page says so and links the tiny LM's)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from app.engine.grpo.params import Conventions
from app.engine.jobs.tasks import Job, JobParams, Progress
from app.kinds.smollm.engine.run_params import DEFAULT_STEPS, SmolRunParams
from app.kinds.smollm.engine.run_records import RunAnswer, RunPoint, SmolRunResult

TASK = "smollm_path"
PATHS = ("r1-zero",)  # the paths this model runs
TYPES = (SmolRunResult, RunPoint, RunAnswer, SmolRunParams)
STAGES_PER_STEP = 3  # sampling, scoring, update (r1_zero_run.STAGES)
SCALE_RANGE = (0.05, 5.0)  # × the walkthrough's 20 steps: 1 to 100 steps


def steps_for(scale: float) -> int:
    return max(1, round(DEFAULT_STEPS * scale))


def run_params(seed: int, scale: float = 1.0, conventions: Conventions | None = None) -> SmolRunParams:
    """The run's parameters: the conventions given (their max_length only when set: else the token budget)."""
    fields: dict[str, Any] = {}
    if conventions is not None:
        fields = conventions.model_dump(exclude=None if "max_length" in conventions.model_fields_set
                                        else {"max_length"})
    return SmolRunParams(**{**fields, "seed": seed, "steps": steps_for(scale)})


class SmolPathJob(JobParams):
    """A training path's run on the real model: the path, the run's parameters, the device, and an added model's
    GGUF file (none: the default model)."""
    task: ClassVar[str] = TASK
    path: str
    run: SmolRunParams
    device: str
    model: str | None = None


def path_params(path: str, params: SmolRunParams, device: str, model: Path | None = None) -> SmolPathJob:
    if path not in PATHS:
        raise KeyError(path)
    return SmolPathJob(path=path, run=params, device=device, model=str(model) if model else None)


def path_job(path: str, params: SmolRunParams, device: str, model: Path | None = None) -> Job:
    return path_params(path, params, device, model).job()


def run(job: SmolPathJob, progress: Progress, data_dir: Path) -> SmolRunResult:
    from app.engine.runtime.device import intra_op_threads
    from app.kinds.smollm.engine import checkpoint
    from app.kinds.smollm.engine.r1_zero_run import STAGES, run_r1_zero
    from app.kinds.smollm.engine.threads import job_threads

    params = job.run
    total = params.steps * STAGES_PER_STEP

    def report(stage: str, step: int, steps: int) -> None:
        progress(stage, step + 1, step * STAGES_PER_STEP + STAGES.index(stage), total)

    loaded = checkpoint.load(data_dir, Path(job.model) if job.model else None)
    with intra_op_threads(job_threads()):
        return run_r1_zero(params, loaded, job.device, progress=report)


def title(job: SmolPathJob) -> str:
    p = job.run
    model = Path(job.model).stem if job.model else "SmolLM2"
    return (f"{model} {job.path}: {p.steps} steps, G {p.group_size} x {p.max_new_tokens} tokens, "
            f"seed {p.seed} ({job.device})")


def payload(job: SmolPathJob, result: SmolRunResult) -> dict[str, Any]:
    """The paths API's `result`: every step's logged numbers and its answers."""
    return {"seconds": result.seconds, "device": result.device, "prompts": list(result.task_names),
            "steps": [{"step": p.step, "prompt": p.task_name, "reward_mean": p.reward_mean,
                       "reward_parts": p.part_means, "tied": p.tied, "length_mean": p.length_mean,
                       "stopped_share": p.stopped_share, "kl_mean": p.kl_mean, "clip_share": p.clip_share,
                       "loss": p.loss, "grad_norm": p.grad_norm, "seconds": p.seconds,
                       "answers": [{"text": a.text, "reward": a.reward, "advantage": a.advantage,
                                    "length": a.length, "stopped": a.stopped} for a in p.answers]}
                      for p in result.points]}
