"""The toy's training paths as jobs (app/engine/jobs): computed once by a runner for
every worker and replica, kept in the store. A toy run takes under a second, so a page waits for
it (on its compute thread, never the event loop) instead of polling; it runs in its own lane, never
behind a tiny-LM path."""
from __future__ import annotations

from typing import ClassVar

from app.engine.jobs.client import JobClient, wait_result
from app.engine.jobs.tasks import Job, JobParams, Progress
from app.engine.runtime.compute import ComputeBusy
from app.kinds.toy.domain.process_spec import ProcessCatalog, Stage
from app.kinds.toy.engine.processes import CurvePoint, LastUpdate, Metrics, ProcessRun, StageRun, run_process

TASK = "toy_process"
TYPES = (ProcessRun, StageRun, CurvePoint, Metrics, LastUpdate, Stage)
WAIT_S = 60.0  # a queue of a few dozen toy runs; past it the page answers 503 (busy), never hangs


class ProcessJob(JobParams):
    """A path's run. The catalog goes with the job (its stages, their iterations and rewards): a runner on
    another machine computes what this process's PROCESSES_FILE says, and another file is another job."""
    task: ClassVar[str] = TASK
    process: str
    seed: int
    iterations_scale: int = 1
    device: str = "cpu"
    catalog: ProcessCatalog


def process_job(catalog: ProcessCatalog, process_id: str, seed: int, iterations_scale: int = 1) -> Job:
    catalog.get(process_id)  # KeyError for an unknown id, before anything is stored
    return ProcessJob(process=process_id, seed=int(seed), iterations_scale=int(iterations_scale),
                      catalog=catalog).job()


def run_task(params: ProcessJob, progress: Progress) -> ProcessRun:
    stages = len(params.catalog.get(params.process).stages)
    progress("running", 0, 0, stages)
    run = run_process(params.catalog, params.process, params.seed, params.iterations_scale)
    progress("done", stages, stages, stages)
    return run


def title(params: ProcessJob) -> str:
    scale = "" if params.iterations_scale == 1 else f" ×{params.iterations_scale} iterations"
    return f"{params.process} seed {params.seed}{scale}"


def process_run(jobs: JobClient, catalog: ProcessCatalog, process_id: str, seed: int,
                iterations_scale: int = 1) -> ProcessRun:
    """The run of a path, from the app's job store (`jobs`, its client): computed by a runner if nobody has yet."""
    try:
        run: ProcessRun = wait_result(jobs, process_job(catalog, process_id, seed, iterations_scale), WAIT_S)
    except TimeoutError as exc:  # the runners are behind: a 503 with Retry-After, like a full compute queue
        raise ComputeBusy(str(exc)) from None
    return run
