"""Everything one tiny-LM page's numbers come from, obtained once before its screen is built: the
token-level GRPO step, and with a training path chosen its job (submitted, or found in the store,
done or not), in overlay mode every path's, and for R1-Zero the same run under Dr. GRPO's
conventions once the main run is done. The page asks for this (web/pages.py), then the views build
the screen from it: they never run or wait.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.domain.training_paths import PATH_IDS
from app.engine.jobs.client import JobClient
from app.engine.jobs.tasks import Job
from app.kinds.tiny_lm.engine.lm_plans import DR_GRPO
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.path_tasks import path_job
from app.kinds.tiny_lm.engine.step import run_token_step
from app.kinds.tiny_lm.engine.token_records import TokenStepResult
from app.stores.jobs import JobRecord


@dataclass(frozen=True)
class PathRun:
    """One path's job as the store has it now (None: nobody started it), and its result once done."""
    job: JobRecord | None
    result: Any | None
    ahead: int | None = None  # queued: how many runs go before it (JobClient.ahead)


@dataclass(frozen=True)
class PathInputs:
    path: str
    run: PathRun
    overlay: Mapping[str, PathRun] = field(default_factory=dict)  # every path's, in overlay mode
    dr_grpo: PathRun | None = None  # R1-Zero under Dr. GRPO's conventions, after the main run


@dataclass(frozen=True)
class TokenInputs:
    result: TokenStepResult | None  # None for the paths box alone
    paths: PathInputs | None = None


def _run(jobs: JobClient, job: JobRecord | None) -> PathRun:
    if job is None:
        return PathRun(None, None)
    return PathRun(job, jobs.result(job), jobs.ahead(job) if job.state == "queued" else None)


def path_jobs(path: str, seed: int, device: str, overlay: bool) -> list[Job]:
    """The runs a chosen path's box shows, which its Run button starts: the path (R1-Zero with its Dr. GRPO
    twin), or in overlay mode every path."""
    if overlay:
        return [path_job(p, seed, device) for p in PATH_IDS]
    runs = [path_job(path, seed, device)]
    if path == "r1-zero":
        runs.append(path_job(path, seed, device, conventions=DR_GRPO))
    return runs


def obtain_paths(jobs: JobClient, path: str | None, seed: int, device: str, overlay: bool) -> PathInputs | None:
    """The chosen path's jobs as the app's store has them (`jobs`, its client), in overlay mode every
    path's; never queues one."""
    if not path:
        return None
    main = _run(jobs, jobs.find(path_job(path, seed, device)))
    if overlay:
        runs = {p: main if p == path else _run(jobs, jobs.find(path_job(p, seed, device))) for p in PATH_IDS}
        return PathInputs(path, main, runs)
    dr = None
    if path == "r1-zero" and main.result is not None:
        dr = _run(jobs, jobs.find(path_job(path, seed, device, conventions=DR_GRPO)))
    return PathInputs(path, main, dr_grpo=dr)


def obtain(jobs: JobClient, params: TokenParams, device: str, path: str | None, overlay: bool) -> TokenInputs:
    """The step (cached per parameters and device) and the chosen path's jobs (read with `jobs`, the app's client)."""
    return TokenInputs(run_token_step(params, device), obtain_paths(jobs, path, params.seed, device, overlay))
