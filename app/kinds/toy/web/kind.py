"""The toy kind (ToyGRPO: four choices, one per completion), as the house registers it."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.domain.catalog import CatalogEntry, Featured
from app.engine.jobs.tasks import Job, JobTask
from app.kinds.toy.domain.kind_id import KIND_ID
from app.kinds.toy.domain.process_spec import ProcessCatalog, load_processes
from app.kinds.toy.engine import export_target, process_jobs
from app.kinds.toy.engine.node_map import is_runnable
from app.kinds.toy.engine.params import DEFAULT_SEED
from app.kinds.toy.engine.processes import ProcessRun
from app.kinds.toy.engine.step import TrainingDiverged
from app.kinds.toy.views.form import allowed_range
from app.kinds.toy.views.meaning import describe_toy
from app.kinds.toy.views.story import STORIES
from app.kinds.toy.web import api, processes
from app.kinds.toy.web.pages import step_page
from app.kinds.toy.web.schemas.processes import process_run_payload
from app.views.urls import STEP_API
from app.web.kind import FIRST_PAGE, DefaultRun, Kind, KindRoute, Moved


def install(app: FastAPI) -> None:
    app.state.processes = load_processes(app.state.settings.processes_file)  # a bad file stops start-up

    @app.exception_handler(TrainingDiverged)
    async def _diverged(_request: Request, exc: TrainingDiverged):
        detail = [{"param": "learning_rate", "message": str(exc), "allowed": allowed_range("learning_rate")}]
        return JSONResponse({"error": f"learning_rate: {exc}", "detail": detail}, status_code=422)


def _payload(params: process_jobs.ProcessJob, run: ProcessRun) -> dict:
    return process_run_payload(params.catalog, run)


PROCESS_TASK = JobTask(KIND_ID, process_jobs.ProcessJob, process_jobs.run_task, process_jobs.TYPES, _payload,
                       process_jobs.title, lane="short")


def path_job(request: Request, entry: CatalogEntry, path: str, query: Mapping[str, Any]) -> Job:
    """A path's job: `seed` and `iterations_scale` (every stage's iterations multiplied, 1 to 8)."""
    if query.get("scale") is not None:
        raise ValueError("scale: the tiny LM's parameter; the toy's paths take `iterations_scale`")
    given = query.get("conventions") or {}
    if given:  # each stage of a toy process names its own conventions (walkthroughs/processes.toml)
        name = "preset" if "preset" in given else sorted(given)[0]
        raise ValueError(f"{name}: the toy's paths take their conventions from the process catalog, stage by stage")
    scale = 1 if query.get("iterations_scale") is None else int(query["iterations_scale"])
    if not 1 <= scale <= 8:
        raise ValueError(f"iterations_scale: {scale} is outside [1, 8]")
    seed = 0 if query.get("seed") is None else int(query["seed"])
    catalog: ProcessCatalog = request.app.state.processes
    return process_jobs.process_job(catalog, path, seed, scale)


def step_jobs(request: Request, entry: CatalogEntry) -> list[Job]:
    """With `process` named, the page shows that path and compares every path's end: all their runs."""
    catalog: ProcessCatalog = request.app.state.processes
    query = request.query_params
    if query.get("process") not in catalog.ids:
        return []
    try:
        seed = int(query.get("seed", DEFAULT_SEED))
    except ValueError:
        return []
    if not 0 <= seed <= 2**31 - 1:
        return []
    return [process_jobs.process_job(catalog, pid, seed) for pid in catalog.ids]


def default_runs(app: FastAPI) -> list[DefaultRun]:
    """Every path at the page's default seed and at the API's (0): what a first visitor opens, first of all
    (seconds in all)."""
    catalog: ProcessCatalog = app.state.processes
    return [DefaultRun(process_jobs.process_job(catalog, pid, seed), FIRST_PAGE)
            for seed in dict.fromkeys((DEFAULT_SEED, 0)) for pid in catalog.ids]


# Its walkthrough is the app's first: `/` opens on it with these sentences.
FEATURED = Featured(
    "toy_grpo", "The GRPO objective, number by number",
    "A four-choice toy policy: group advantages, the policy ratio, the clipped surrogate and the KL penalty on "
    "one-token answers, with the conventions of the paper, TRL, verl, Dr. GRPO and DAPO side by side, and the "
    "R1-Zero, R1 and distillation paths. Start here.",
    intro="The first walkthrough is a toy you can hold in your head: six prompts, four possible answers to each "
          "(readable and right; right but in mixed languages; right but ignoring the answer format; wrong), and "
          "a policy that gives each answer a probability. Every number on these pages is computed by PyTorch on "
          "this server, for the numbers you choose.",
    rank=0, points=tuple((step, story.point) for step, story in STORIES.items()))

KIND = Kind(id=KIND_ID, title="ToyGRPO: a four-choice policy, one choice per completion",
            matches=is_runnable, step_page=step_page, install=install,
            templates=Path(__file__).resolve().parents[1] / "templates",
            static=Path(__file__).resolve().parents[1] / "static", stylesheets=("toy.css",), describe=describe_toy,
            allowed_range=allowed_range, tasks=(PROCESS_TASK,), path_job=path_job,
            step_jobs=step_jobs, default_runs=default_runs, featured=(FEATURED,),
            export_targets=export_target.TARGETS,
            step_api=(KindRoute(api.get_tensors, responses=api.TENSORS_RESPONSES),),
            # Compare mode and the paths' own curves (with their side-by-side comparison) are the toy's alone
            routers=(api.router, processes.router),
            moved=(Moved("/api/walkthroughs/{walkthrough_id}/tensors", STEP_API),))
