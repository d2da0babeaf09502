"""The tiny-LM walkthrough's step page: the same URL and template as any walkthrough, its
numbers from the token-level engine. Thin: parsing lives in views/url_state.py, building in views/screen.py."""
from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal

from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse

from app.domain.training_paths import PATH_IDS, canonical_path_id
from app.kinds.tiny_lm.domain.kind_id import KIND_ID
from app.kinds.tiny_lm.engine.lm_plans import DR_GRPO
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.path_tasks import path_job
from app.kinds.tiny_lm.engine.step_inputs import obtain, obtain_paths, path_jobs
from app.kinds.tiny_lm.views import urls
from app.kinds.tiny_lm.views.screen import build_token_screen, path_panel
from app.kinds.tiny_lm.views.url_state import BadTokenView, TokenQuery, read_token_query
from app.views.urls import URLS
from app.views.view_state import UnknownViewPart, ViewState
from app.web.deps import CatalogDep, DeviceDep, find_loaded
from app.web.errors import NotFound
from app.web.jobs.start import start_jobs
from app.web.kind import StepRequest
from app.web.rendering import render, wants_fragment
from app.web.step_pages import refused_form, step_context, step_response

FORM = "tiny_lm/token_form.html"
PATHS = "tiny_lm/lm_path_panel.html"



def step_page(asked: StepRequest):
    request, walkthrough_id, step_id, snapshot = asked.request, asked.walkthrough_id, asked.step_id, asked.snapshot
    cat, dev = asked.catalog, asked.device
    query = request.query_params
    try:
        q = read_token_query(query)
        state = ViewState.parse(snapshot, walkthrough_id, step_id, expanded=query.get("expanded"),
                                node=query.get("node"), view=query.get("view"), own=q)
        # One way: the engine's results first (the step, cached; the chosen path's jobs, as the store
        # has them), then the screen from them, then the template.
        inputs = obtain(request.app.state.context.jobs, q.params, dev, q.path, q.overlay)
        screen = build_token_screen(snapshot, state, inputs)  # refuses a completion or head it lacks
    except (UnknownViewPart, BadTokenView) as exc:
        raise NotFound(str(exc)) from None
    context = step_context(screen, cat)
    if q.form is not None:
        return refused_form(request, FORM, "token-form", context)
    running = screen.token is not None and screen.token.paths is not None and screen.token.paths.running
    return step_response(request, screen, context, {"Cache-Control": NO_STORE} if running else None)


NO_STORE = "no-store"  # a page showing a run in progress changes: neither cache may keep it
Overlay = Annotated[Literal["all"] | None, Query(description="all: the three paths on one chart per metric")]
# The box's second R1-Zero run (lm_plans.DR_GRPO: Dr. GRPO's conventions at R1's β), not the API's `preset`
# (which would bring the preset's own β).
Compare = Annotated[Literal["dr_grpo"] | None, Query(description="dr_grpo: the box's R1-Zero run under Dr. GRPO's "
                                                                 "conventions")]


def path_fragment(request: Request, walkthrough_id: str, path: str, cat: CatalogDep, dev: DeviceDep, seed: int = 3,
                  overlay: Overlay = None):
    """The paths box alone, as the page polls it while a run goes on (a GET: it never starts one)."""
    entry = find_loaded(cat, walkthrough_id)
    snapshot = entry.snapshot
    assert snapshot is not None
    if canonical_path_id(path) != path and entry.kind == KIND_ID:  # an old id (r1_zero): its new URL
        return RedirectResponse(urls.lm_path(walkthrough_id, canonical_path_id(path), dict(request.query_params)),
                                status_code=303)
    if path not in PATH_IDS or entry.kind != KIND_ID:
        raise NotFound(f"no training path {path!r} for walkthrough {walkthrough_id!r}")
    q = TokenQuery(TokenParams(seed=seed), None, None, 0, 0, path, overlay is not None)
    step = snapshot.opening_step_id

    def page(**change) -> str:
        return URLS.step(walkthrough_id, step, replace(q, **change).query()) + "#lm-path-panel"

    runs = obtain_paths(request.app.state.context.jobs, path, seed, dev, overlay is not None)
    panel = path_panel(walkthrough_id, q, runs, {p: page(path=p, overlay=False) for p in PATH_IDS}, page(overlay=True))
    return render(request, PATHS, PATHS, {"path_panel": panel, "seed": seed},
                  headers={"Cache-Control": NO_STORE} if panel.running else None)


async def start_path(request: Request, walkthrough_id: str, path: str, cat: CatalogDep, dev: DeviceDep, seed: int = 3,
                     compare: Compare = None, overlay: Overlay = None):
    """The box's Run (the path; R1-Zero with its Dr. GRPO twin; with overlay=all every path) and "Try again"
    on a failed run (compare=dr_grpo: R1-Zero's Dr. GRPO run): queued (rate-limited, bounded), then the box
    (htmx) or the page showing it."""
    entry = find_loaded(cat, walkthrough_id)
    if path not in PATH_IDS or entry.kind != KIND_ID or (compare is not None and path != "r1-zero"):
        raise NotFound(f"no training path {path!r} for walkthrough {walkthrough_id!r}")
    runs = ([path_job(path, seed, dev, conventions=DR_GRPO)] if compare else
            path_jobs(path, seed, dev, overlay is not None))
    await start_jobs(request, runs)
    if wants_fragment(request):
        return await run_in_threadpool(path_fragment, request, walkthrough_id, path, cat, dev, seed, overlay)
    assert entry.snapshot is not None
    q = TokenQuery(TokenParams(seed=seed), None, None, 0, 0, path, overlay is not None)
    return RedirectResponse(URLS.step(walkthrough_id, entry.snapshot.opening_step_id, q.query()) + "#lm-path-panel",
                            status_code=303)
