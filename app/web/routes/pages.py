"""HTML pages: the walkthrough screen as a full page or an htmx fragment. Thin."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Request, UploadFile
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse

from app.domain.catalog import Catalog, CatalogEntry
from app.domain.uploads import UploadRejected
from app.views.home import build_home
from app.views.screen import build_view_only_screen
from app.views.upload_refusal import Refusal, record_refusal
from app.views.urls import URLS
from app.views.view_state import NoKindState, UnknownViewPart, ViewState
from app.views.walkthrough_list import list_walkthroughs
from app.web.deps import CatalogDep, ComputeDep, find_loaded, find_snapshot, read_capped
from app.web.errors import NotFound
from app.web.jobs.start import start_jobs
from app.web.jobs.wait import await_jobs
from app.web.kind import KindRegistry, StepRequest
from app.web.rendering import templates_of
from app.web.step_pages import step_context, step_response

router = APIRouter(include_in_schema=False)

UPLOAD = "pages/upload.html"


@router.get("/")
async def home(request: Request, cat: CatalogDep):
    if cat.default_id is None:
        return templates_of(request).TemplateResponse(request, "pages/error.html", {
            "status": 503, "title": "No walkthrough loaded",
            "message": "No walkthrough file in the walkthroughs folder could be loaded.",
            "entries": cat.entries()}, status_code=503)
    entry = find_loaded(cat, cat.default_id)
    home_view = build_home(entry, cat.entries(), cat.featured)
    return templates_of(request).TemplateResponse(request, "pages/home.html", {"home": home_view})


@router.get("/walkthroughs")
def walkthroughs_page(request: Request, cat: CatalogDep):
    listed = list_walkthroughs(cat.entries(), cat.featured)
    return templates_of(request).TemplateResponse(request, "pages/walkthroughs.html", {"listed": listed})


def upload_response(request: Request, refusal: Refusal | None = None) -> HTMLResponse:
    """The upload page; with a refusal (any of its forms'), the refusal first, focused, its form right under it
    (issue 49), answered with the refusal's status and never stored by a cache."""
    kinds = request.app.state.kinds
    response = templates_of(request).TemplateResponse(request, UPLOAD, {
        "refusal": refusal, "help": kinds.upload_help, "formats": kinds.upload_formats},
        status_code=refusal.status if refusal is not None else 200)
    if refusal is not None:
        response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/walkthroughs/new")
def upload_form(request: Request):
    return upload_response(request)


@router.post("/walkthroughs/new")
async def upload_page(request: Request, cat: CatalogDep, file: Annotated[UploadFile, File()]):
    """The form's target: success opens the snapshot; a refusal is said at the top of the page, naming the file
    and the field, with the form right under it."""
    try:
        raw = await read_capped(request, file)
        entry, _ = await run_in_threadpool(cat.uploads.add, raw, file.filename or "upload.json")
    except UploadRejected as exc:
        return upload_response(request, record_refusal(file.filename, str(exc), exc.status))
    return RedirectResponse(URLS.step(entry.id, entry.snapshot.opening_step_id), status_code=303)


@router.get("/walkthroughs/{walkthrough_id}")
def walkthrough_home(walkthrough_id: str, cat: CatalogDep):
    snapshot = find_snapshot(cat, walkthrough_id)
    return RedirectResponse(URLS.step(walkthrough_id, snapshot.opening_step_id), status_code=303)


# `:path`: a step id may contain "/" (it is only ever compared, never used as a path)
@router.get("/walkthroughs/{walkthrough_id}/steps/{step_id:path}")
async def step_page(request: Request, walkthrough_id: str, step_id: str, compute: ComputeDep):
    # On the compute executor (a worker process), not the request pool nor the event loop: the
    # view may compute a step (a cache miss), and its HTML is rendered there too. A Request does
    # not pickle: the worker gets the plain part of its scope and builds its own. The training runs
    # the page reads (jobs) are awaited first, here, so waiting for them holds no compute slot.
    entry = find_loaded(request.app.state.catalog, walkthrough_id)
    kind = request.app.state.kinds.get(entry.kind)
    if kind is not None and kind.step_jobs is not None and kind.waits_for_jobs:
        await await_jobs(request.app.state.context.jobs, kind.step_jobs(request, entry))
    return await compute.run_in_app(step_work, portable_scope(request), walkthrough_id, step_id)


@router.post("/walkthroughs/{walkthrough_id}/steps/{step_id:path}")
async def start_step_runs(request: Request, walkthrough_id: str, step_id: str):
    """A step page's Run button: start the runs its address reads (rate-limited, bounded), then open it."""
    entry = find_loaded(request.app.state.catalog, walkthrough_id)
    kind = request.app.state.kinds.get(entry.kind)
    if kind is not None and kind.step_jobs is not None:
        await start_jobs(request, kind.step_jobs(request, entry))
    query = request.url.query
    return RedirectResponse(request.url.path + (f"?{query}" if query else ""), status_code=303)


# What a step page reads of its request (path, query, headers, URL parts); no app, no state.
SCOPE_KEYS = ("type", "method", "path", "raw_path", "query_string", "headers", "root_path", "scheme", "server",
              "http_version")


def portable_scope(request: Request) -> dict:
    return {key: request.scope[key] for key in SCOPE_KEYS if key in request.scope}


def step_work(app, scope: dict, walkthrough_id: str, step_id: str):
    """The entry's kind draws the step; a walkthrough no kind runs is drawn from its file alone.
    `app` is the app of the process this runs in (executor.run_in_app)."""
    request = Request({**scope, "app": app})
    cat: Catalog = app.state.catalog
    dev: str = app.state.device
    kinds: KindRegistry = app.state.kinds
    entry = find_loaded(cat, walkthrough_id)
    kind = kinds.get(entry.kind)
    if kind is not None and kind.step_page is not None:
        return kind.step_page(StepRequest(request, walkthrough_id, step_id, entry, cat, dev))
    return view_only_page(request, walkthrough_id, step_id, entry, cat)


def view_only_page(request: Request, walkthrough_id: str, step_id: str, entry: CatalogEntry, cat: Catalog):
    snapshot = entry.snapshot
    assert snapshot is not None
    query = request.query_params
    try:
        state = ViewState.parse(snapshot, walkthrough_id, step_id, expanded=query.get("expanded"),
                                node=query.get("node"), view=query.get("view"), own=NoKindState())
    except UnknownViewPart as exc:
        raise NotFound(str(exc)) from None
    screen = build_view_only_screen(snapshot, state)
    return step_response(request, screen, step_context(screen, cat))


