"""The real-model walkthrough's step page and its progress box. Thin: the query is read by
views/url_state.py, the screen built by views/screen.py; the step itself is a job (engine/step_task.py)
that only a POST starts (the shared route `POST /walkthroughs/{id}/steps/{step}`), so a GET reads
the job store and draws what is there: the figures when the step is done, else its progress."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.engine.jobs.client import JobClient
from app.kinds.smollm.domain.kind_id import KIND_ID
from app.kinds.smollm.engine import checkpoint, step_task
from app.kinds.smollm.views import urls
from app.kinds.smollm.views.model_facts import model_facts
from app.kinds.smollm.views.screen import RunState, build_smol_screen
from app.kinds.smollm.views.url_state import BadSmolView, SmolQuery, read_smol_query
from app.kinds.smollm.web.model_choice import own_model
from app.kinds.smollm.web.paths import build_panel
from app.stores.jobs import SERVER
from app.views.urls import URLS
from app.views.view_state import UnknownViewPart, ViewState
from app.web.deps import CatalogDep, DeviceDep, find_loaded
from app.web.errors import NotFound
from app.web.kind import StepRequest
from app.web.rendering import render
from app.web.step_pages import refused_form, step_context, step_response

FORM = "smollm/form.html"
PROGRESS = "smollm/progress.html"
NO_STORE = "no-store"  # a page showing a run in progress changes: neither cache may keep it

router = APIRouter(include_in_schema=False)


def read_query(query: Mapping[str, str]) -> SmolQuery:
    try:
        return read_smol_query(query)
    except BadSmolView as exc:
        raise NotFound(str(exc)) from None


def run_state(jobs: JobClient, q: SmolQuery, device: str, model: Path | None = None):
    """(RunState, the step's result or None) as the app's job store (`jobs`, its client) has
    them; a GET never queues. `model`: an added
    model's GGUF file (none: the default model's)."""
    if not checkpoint.runnable(model):
        return RunState("no-checkpoint", install_hint=checkpoint.INSTALL_HINT), None
    if q.refused is not None:
        return RunState("not-started"), None
    job = jobs.find(step_task.step_job(q.params, device, model))
    if job is None:
        return RunState("not-started"), None
    if job.state == "done":
        result = jobs.result(job)
        if result is not None:
            return RunState("done", seconds=job.seconds), result
        return RunState("not-started"), None
    if job.state == "failed":
        return RunState("failed", error=job.error), None
    return RunState(job.state, job.stage, job.fraction, ahead=jobs.ahead(job), startup=job.client == SERVER), None


def step_page(asked: StepRequest) -> Response:
    request, walkthrough_id, step_id, snapshot = asked.request, asked.walkthrough_id, asked.step_id, asked.snapshot
    query = request.query_params
    q = read_query(query)
    try:
        state = ViewState.parse(snapshot, walkthrough_id, step_id, expanded=query.get("expanded"),
                                node=query.get("node"), view=query.get("view"), own=q)
    except UnknownViewPart as exc:
        raise NotFound(str(exc)) from None
    model, jobs = own_model(request, walkthrough_id), request.app.state.context.jobs
    run, result = run_state(jobs, q, asked.device, model)
    if result is not None:
        _check_view(result, q)
    poll = urls.progress(walkthrough_id, {**q.query(), "step": step_id})
    panel = build_panel(jobs, walkthrough_id, step_id, q, asked.device, model, model_facts(snapshot))
    screen = build_smol_screen(snapshot, state, run, result, state.url(snapshot), poll, panel)
    context = step_context(screen, asked.catalog)
    if q.refused is not None:
        return refused_form(request, FORM, "smol-form", context)
    still = run.state != "done" or panel.view is None  # the step or the paths panel may still change
    return step_response(request, screen, context, {"Cache-Control": NO_STORE} if still else None)


def _check_view(result, q: SmolQuery) -> None:
    if q.completion >= result.group_size:
        raise NotFound(f"completion {q.completion}: the group has {result.group_size} answers (0 to "
                       f"{result.group_size - 1})")
    heads = len(result.attention[0]) if result.attention else 0
    if q.head >= max(1, heads):
        raise NotFound(f"head {q.head}: the block has {heads} heads (0 to {heads - 1})")


@router.get("/walkthroughs/{walkthrough_id}/smollm-progress")
def progress_box(request: Request, walkthrough_id: str, cat: CatalogDep, dev: DeviceDep, step: str = ""):
    """The progress box alone, as the page polls it while the step runs (a GET: it never starts one).
    Once the step is done it sends the reader to the finished page (HX-Redirect)."""
    entry = find_loaded(cat, walkthrough_id)
    if entry.snapshot is None or entry.kind != KIND_ID:
        raise NotFound(f"walkthrough {walkthrough_id!r} is not the real model's")
    query = {k: v for k, v in request.query_params.items() if k != "step"}
    q = read_query(query)
    run, _ = run_state(request.app.state.context.jobs, q, dev, own_model(request, walkthrough_id))
    step_id = step if step in {s.id for s in entry.snapshot.steps} else entry.snapshot.opening_step_id
    page = URLS.step(walkthrough_id, step_id, q.query())
    headers = {"Cache-Control": NO_STORE}
    if run.state == "done":
        headers["HX-Redirect"] = page
    poll = f"{request.url.path}?{request.url.query}"
    return render(request, PROGRESS, PROGRESS, {"run": run, "page": page, "poll_url": poll}, headers=headers)
