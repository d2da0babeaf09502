"""The real model's training-paths panel on every step page, and its two handlers at the house's paths-box
address (/walkthroughs/{id}/paths/{path}): GET the panel alone (what it polls while R1-Zero runs; a GET never
starts one) and POST its Run (queued, rate-limited and bounded as every start is, app/web/jobs/start.py).
Thin: views/run_panel.py draws, engine/run_task.py runs."""
from __future__ import annotations

from pathlib import Path

from fastapi import Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse

from app.domain.catalog import CatalogEntry
from app.domain.training_paths import PATH_IDS
from app.engine.jobs.client import JobClient
from app.engine.jobs.tasks import Job
from app.kinds.smollm.domain.kind_id import KIND_ID
from app.kinds.smollm.engine import checkpoint, run_task
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.views import urls
from app.kinds.smollm.views.model_facts import SMOLLM2, ModelFacts, model_facts
from app.kinds.smollm.views.run_panel import WHY_NOT, RunPanel, path_tabs, run_view
from app.kinds.smollm.views.url_state import SmolQuery
from app.kinds.smollm.web.model_choice import own_model
from app.views.urls import URLS
from app.web.deps import CatalogDep, DeviceDep, find_loaded
from app.web.errors import NotFound
from app.web.jobs.start import start_jobs
from app.web.rendering import render, wants_fragment

PANEL = "smollm/paths.html"
DEFAULT_SEED = 0
NO_STORE = "no-store"


def r1_zero_params(device: str, seed: int = DEFAULT_SEED, model: Path | None = None) -> run_task.SmolPathJob:
    """The panel's run: R1-Zero at its defaults (20 steps, G 8 x 32 tokens) from the page's seed (the step's
    sampling seed: step s of the run samples with seed + s) on the server's device; `model`: an added model's file."""
    return run_task.path_params("r1-zero", run_task.run_params(seed), device, model)


def r1_zero_job(device: str, seed: int = DEFAULT_SEED, model: Path | None = None) -> Job:
    return r1_zero_params(device, seed, model).job()


def build_panel(jobs: JobClient, walkthrough_id: str, step_id: str, q: SmolQuery, device: str,
                model: Path | None = None, facts: ModelFacts = SMOLLM2) -> RunPanel:
    """The paths panel of a walkthrough whose model is `facts` (run by `model`'s file; none: the default's),
    its run as the app's job store has it (`jobs`, its client)."""
    path = q.process or "r1-zero"
    seed = q.params.seed
    typed = r1_zero_params(device, seed, model)
    run = typed.run
    job = jobs.find(typed.job()) if checkpoint.runnable(model) else None
    result = jobs.result(job) if job is not None and job.state == "done" else None
    waiting = job is not None and not job.finished

    def page(p: str) -> str:
        return URLS.step(walkthrough_id, step_id, q.with_view(process=p).query()) + "#smol-paths"

    return RunPanel(path, path_tabs(path, page), job, run_view(result, facts) if result is not None else None,
                    start_url=urls.r1_zero_paths(walkthrough_id, step_id, seed),
                    poll_url=urls.r1_zero_paths(walkthrough_id, step_id, seed, path) if waiting else None,
                    why_not=WHY_NOT.get(path), tiny_lm_url=urls.tiny_lm_path(path), steps=run.steps,
                    group_size=run.group_size, max_new_tokens=run.max_new_tokens, seed=seed,
                    queue_place=jobs.ahead(job) if job is not None else None, facts=facts)


def _entry(cat, walkthrough_id: str, path: str) -> CatalogEntry:
    entry = find_loaded(cat, walkthrough_id)
    if entry.kind != KIND_ID or path not in run_task.PATHS:
        raise NotFound(f"no training path {path!r} runs on walkthrough {walkthrough_id!r}")
    return entry


def _step_id(entry: CatalogEntry, step: str) -> str:
    assert entry.snapshot is not None
    return step if step in {s.id for s in entry.snapshot.steps} else entry.snapshot.opening_step_id


def paths_panel(request: Request, walkthrough_id: str, path: str, cat: CatalogDep, dev: DeviceDep, step: str = "",
                process: str = "r1-zero", seed: str = str(DEFAULT_SEED)):
    """The panel alone, as it polls itself while the run is queued or going."""
    entry = _entry(cat, walkthrough_id, path)
    if process not in PATH_IDS:
        raise NotFound(f"process must be one of {', '.join(PATH_IDS)}, got {process!r}")
    assert entry.snapshot is not None
    jobs = request.app.state.context.jobs
    panel = build_panel(jobs, walkthrough_id, _step_id(entry, step), SmolQuery(_seeded(seed), process=process), dev,
                        own_model(request, walkthrough_id), model_facts(entry.snapshot))
    headers = {"Cache-Control": NO_STORE} if panel.poll_url or panel.view is None else None
    return render(request, PANEL, PANEL, {"paths": panel}, headers=headers)


async def start_run(request: Request, walkthrough_id: str, path: str, cat: CatalogDep, dev: DeviceDep,
                    step: str = "", seed: str = str(DEFAULT_SEED)):
    """The panel's Run, or Try again after a failure: the run queued, then the panel (htmx) or the page."""
    entry = _entry(cat, walkthrough_id, path)
    model = own_model(request, walkthrough_id)
    if not checkpoint.runnable(model):
        raise NotFound("the real model's checkpoint is not installed on this server")
    params = _seeded(seed)
    await start_jobs(request, [r1_zero_job(dev, params.seed, model)])  # a failed run is queued again
    step_id = _step_id(entry, step)
    if wants_fragment(request):
        return await run_in_threadpool(paths_panel, request, walkthrough_id, path, cat, dev, step_id, "r1-zero",
                                       str(params.seed))
    query = {"process": "r1-zero", **({"seed": str(params.seed)} if params.seed != SmolParams().seed else {})}
    return RedirectResponse(URLS.step(walkthrough_id, step_id, query) + "#smol-paths", status_code=303)


def _seeded(seed: str) -> SmolParams:
    """The step parameters at their defaults but the seed, validated as the step form's is (a 404 naming it)."""
    try:
        return SmolParams(seed=seed)
    except ValidationError as exc:
        raise NotFound(f"seed: {exc.errors()[0]['msg']}, got {seed!r}") from None
