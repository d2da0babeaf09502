"""HTML pages: the walkthrough screen as a full page or an htmx fragment. Thin."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Request, UploadFile
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse

from app.domain.uploads import UploadRejected
from app.kinds.tiny_lm.engine.token_node_map import is_token_runnable
from app.kinds.tiny_lm.web.pages import path_fragment, token_step_work
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.views.compare_view import build_compare_view
from app.kinds.toy.views.form import FORM_FIELDS, ParamForm
from app.views.screen import build_screen
from app.views.urls import URLS
from app.views.view_state import UnknownViewPart, ViewState, parse_compare
from app.views.walkthrough_list import list_walkthroughs
from app.web.deps import CatalogDep, ComputeDep, DeviceDep, ProcessesDep, find_snapshot, read_capped
from app.web.errors import NotFound
from app.web.rendering import render, templates, wants_fragment

router = APIRouter(include_in_schema=False)

PAGE, VIEW, FORM = "pages/walkthrough.html", "partials/view.html", "partials/param_form.html"
UPLOAD = "pages/upload.html"


def _read_params(request: Request) -> tuple[GRPOParams, ParamForm | None]:
    """Valid params, or the defaults plus a form that shows what was typed and why it failed."""
    raw = {k: v.strip() for k in FORM_FIELDS if (v := request.query_params.get(k)) is not None and v.strip() != ""}
    try:
        return GRPOParams(**raw), None
    except ValidationError as exc:
        return GRPOParams(), ParamForm.refused(raw, exc.errors())


@router.get("/")
async def home(request: Request, cat: CatalogDep, dev: DeviceDep, processes: ProcessesDep, compute: ComputeDep):
    if cat.default_id is None:
        return templates.TemplateResponse(request, "pages/error.html", {
            "status": 503, "title": "No walkthrough loaded",
            "message": "No walkthrough file in the walkthroughs folder could be loaded.",
            "entries": cat.entries()}, status_code=503)
    snapshot = cat.snapshot(cat.default_id)
    return await compute.run(step_work, request, cat.default_id, snapshot.opening_step_id, cat, dev, processes)


@router.get("/walkthroughs")
def walkthroughs_page(request: Request, cat: CatalogDep):
    return templates.TemplateResponse(request, "pages/walkthroughs.html", {"listed": list_walkthroughs(cat.entries())})


@router.get("/walkthroughs/new")
def upload_form(request: Request):
    return templates.TemplateResponse(request, UPLOAD, {"error": None})


@router.post("/walkthroughs/new")
async def upload_page(request: Request, cat: CatalogDep, file: Annotated[UploadFile, File()]):
    """The form's target: success opens the snapshot; a refusal shows the reason next to the field."""
    try:
        raw = await read_capped(file)
        entry, _ = await run_in_threadpool(cat.uploads.add, raw, file.filename or "upload.json")
    except UploadRejected as exc:
        return templates.TemplateResponse(request, UPLOAD, {"error": str(exc)}, status_code=exc.status)
    return RedirectResponse(URLS.step(entry.id, entry.snapshot.opening_step_id), status_code=303)


@router.get("/walkthroughs/{walkthrough_id}")
def walkthrough_home(walkthrough_id: str, cat: CatalogDep):
    snapshot = find_snapshot(cat, walkthrough_id)
    return RedirectResponse(URLS.step(walkthrough_id, snapshot.opening_step_id), status_code=303)


@router.get("/walkthroughs/{walkthrough_id}/paths/{path}")
def lm_path_box(request: Request, walkthrough_id: str, path: str, cat: CatalogDep, dev: DeviceDep, seed: int = 3):
    return path_fragment(request, walkthrough_id, path, seed, cat, dev)


# `:path`: a step id may contain "/" (it is only ever compared, never used as a path)
@router.get("/walkthroughs/{walkthrough_id}/steps/{step_id:path}")
async def step_page(request: Request, walkthrough_id: str, step_id: str, cat: CatalogDep, dev: DeviceDep,
                    processes: ProcessesDep, compute: ComputeDep):
    # On the compute executor, not the request pool: the view may compute a step (a cache miss).
    return await compute.run(step_work, request, walkthrough_id, step_id, cat, dev, processes)


def step_work(request: Request, walkthrough_id: str, step_id: str, cat: CatalogDep, dev: DeviceDep,
              processes: ProcessesDep):
    snapshot = find_snapshot(cat, walkthrough_id)
    if is_token_runnable(snapshot):  # the tiny-LM walkthrough: its own engine, the same page
        return token_step_work(request, walkthrough_id, step_id, snapshot, cat, dev)
    params, invalid_form = _read_params(request)
    compare = parse_compare(request.query_params)  # Compare mode: side B from the vs_ parameters
    try:
        state = ViewState.parse(snapshot, walkthrough_id, step_id, expanded=request.query_params.get("expanded"),
                                node=request.query_params.get("node"), params=params,
                                process=request.query_params.get("process"), stage=request.query_params.get("stage"),
                                processes=processes, view=request.query_params.get("view"),
                                compare=compare.conventions)
    except UnknownViewPart as exc:
        raise NotFound(str(exc)) from None
    screen = build_screen(snapshot, state, dev, invalid_form, processes)
    context = {"screen": screen, "catalog": cat, "switch": list_walkthroughs(cat.entries(), walkthrough_id),
               "compare": build_compare_view(screen, compare, dev) if screen.runnable else None}
    if invalid_form is not None:
        if wants_fragment(request):
            # The previous view stays: only the form is swapped, and the URL is not pushed.
            return render(request, FORM, FORM, context, 422,
                          {"HX-Retarget": "#param-form", "HX-Reswap": "outerHTML", "HX-Push-Url": "false"})
        return render(request, PAGE, VIEW, context, 422)
    if compare.errors:  # the compare form names each refused vs_ parameter
        return render(request, PAGE, VIEW, context, 422)
    canonical = screen.url()
    if not wants_fragment(request) and request.url.path != "/" and \
            dict(request.query_params) != state.query(snapshot):
        return RedirectResponse(canonical, status_code=303)
    headers = {"HX-Push-Url": canonical} if wants_fragment(request) else None
    return render(request, PAGE, VIEW, context, headers=headers)
