"""The toy's training paths as jobs (app/engine/jobs): computed once by a runner for
every worker and replica, kept in the store. A toy run takes under a second, so a page waits for
it (on its compute thread, never the event loop) instead of polling; it runs in its own lane, never
behind a tiny-LM path."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.engine.jobs.client import wait_result
from app.engine.jobs.tasks import Progress
from app.engine.runtime.compute import ComputeBusy
from app.kinds.toy.domain.process_spec import ProcessCatalog, Stage
from app.kinds.toy.engine.processes import CurvePoint, LastUpdate, Metrics, ProcessRun, StageRun, run_process

TASK = "toy_process"
TYPES = (ProcessRun, StageRun, CurvePoint, Metrics, LastUpdate, Stage)
WAIT_S = 60.0  # a queue of a few dozen toy runs; past it the page answers 503 (busy), never hangs


def process_params(catalog: ProcessCatalog, process_id: str, seed: int, iterations_scale: int = 1) -> dict[str, Any]:
    """The catalog goes with the job (its stages, their iterations and rewards): a runner on another
    machine computes what this process's PROCESSES_FILE says, and another file is another job."""
    catalog.get(process_id)  # KeyError for an unknown id, before anything is stored
    return {"process": process_id, "seed": int(seed), "iterations_scale": int(iterations_scale), "device": "cpu",
            "catalog": catalog.model_dump(mode="json", by_alias=True)}


def run_task(params: Mapping[str, Any], progress: Progress) -> ProcessRun:
    catalog = ProcessCatalog.model_validate(params["catalog"])
    stages = len(catalog.get(str(params["process"])).stages)
    progress("running", 0, 0, stages)
    run = run_process(catalog, str(params["process"]), int(params["seed"]), int(params["iterations_scale"]))
    progress("done", stages, stages, stages)
    return run


def title(params: Mapping[str, Any]) -> str:
    scale = "" if int(params["iterations_scale"]) == 1 else f" ×{params['iterations_scale']} iterations"
    return f"{params['process']} seed {params['seed']}{scale}"


def process_run(catalog: ProcessCatalog, process_id: str, seed: int, iterations_scale: int = 1) -> ProcessRun:
    """The run of a path, from the job store: computed by a runner if nobody has yet."""
    try:
        run: ProcessRun = wait_result(TASK, process_params(catalog, process_id, seed, iterations_scale), WAIT_S)
    except TimeoutError as exc:  # the runners are behind: a 503 with Retry-After, like a full compute queue
        raise ComputeBusy(str(exc)) from None
    return run
