"""The run explorer's routes (issue 34). Thin: the store (domain/run_store.py) holds the runs, the view
model (views/run_view.py) builds the page.

- `GET /runs/{id}`: the explorer; `from`/`to` zoom, `step` selects a step, `smooth` (0 to 0.99) draws
  TensorBoard's smoothed line over each metric's. A query it does not take, a
  number that is not one, or a window with no logged step is a 422 page naming the field.
- `GET /api/runs/{id}`: the same run as JSON (steps, every metric's points, cut by M4 unless zoomed
  to `from`/`to`, and the findings).
- `POST /runs/examples/trl`: store the shipped TRL run (examples/trl-1.16-run) as `python -m app open`
  would, then 303 to its explorer; the API's twin answers with its id and URL.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Annotated

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from app.domain.uploads import MB
from app.runs.domain.run_findings import findings
from app.runs.domain.run_follow import FollowedRunStore
from app.runs.domain.run_log import RunLog
from app.runs.domain.run_series import downsample, window
from app.runs.domain.run_smoothing import MAX_WEIGHT
from app.runs.domain.run_store import RunStore
from app.runs.engine.run_opening import open_run_dir
from app.runs.examples import RUN_DIR
from app.runs.views import urls
from app.runs.views.run_charts import BUCKETS
from app.runs.views.run_view import BadRunQuery, RunQuery, resolve
from app.runs.views.run_view_cache import cached_explorer
from app.runs.web import run_follow_pages
from app.runs.web.run_follow_pages import follow_context, follow_offer
from app.stores.uploads import RunRefs
from app.views.urls import URLS
from app.web.deps import CatalogDep, StrictQueryRoute
from app.web.errors import NotFound
from app.web.rendering import render, render_error
from app.web.schemas.errors import ValidationErrorBody, error
from app.web.settings import Settings

PAGE = "run_explorer/run.html"
PARAMS = {"from": "first", "to": "last", "step": "step", "smooth": "smooth"}

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)


def store_for(settings: Settings, refs: RunRefs) -> RunStore:
    """The runs of this data directory, referenced from the upload store's database (`refs`, its backend):
    the server's and `python -m app open RUN_DIR`'s alike. A followed folder's id (`open RUN_DIR --follow`,
    domain/run_follow.py) reads as the version stored for it now."""
    # keep=8 parsed logs: /runs/compare takes up to 8 runs, and a ninth would parse them all again per request
    return FollowedRunStore(settings.resolved_data_dir / "runs", refs=refs, quota_bytes=settings.upload_quota_mb * MB,
                            keep=8)


def install(app: FastAPI) -> None:
    app.state.run_store = store_for(app.state.settings, app.state.catalog.uploads.backend)
    run_follow_pages.install(app)  # a followed run's status, polled by its explorer (issue 50)


def _store(request: Request) -> RunStore:
    return request.app.state.run_store


def _log(request: Request, run_id: str) -> RunLog:
    log = _store(request).get(run_id)
    if log is None:
        raise NotFound(f"no run {run_id!r} here (runs are stored by `python -m app open RUN_DIR` or the "
                       "example's button on the upload page)")
    return log


def _smooth(value: str) -> float:
    try:
        weight = float(value)
    except ValueError:
        weight = math.nan
    if not 0 <= weight <= MAX_WEIGHT:  # NaN too
        raise BadRunQuery("smooth", f"expected a smoothing weight from 0 (none) to {MAX_WEIGHT:g}, got {value!r}")
    return weight + 0.0  # -0.0 is 0


def read_query(request: Request) -> RunQuery:
    values: dict[str, int | float] = {}
    for key, value in request.query_params.multi_items():
        if key not in PARAMS:
            raise BadRunQuery(key, f"not a parameter of the run explorer (it takes {', '.join(PARAMS)})")
        if key == "smooth":
            values["smooth"] = _smooth(value)
            continue
        try:
            values[PARAMS[key]] = int(value)
        except ValueError:
            raise BadRunQuery(key, f"expected a whole step number, got {value!r}") from None
    return RunQuery(**values)


@pages.get("/runs/{run_id}")
async def run_page(request: Request, run_id: str) -> Response:
    def build():  # in the thread pool: the run's links are database rows, and a long run's view is real work
        view = cached_explorer(run_id, _log(request, run_id), read_query(request), _store(request).recorded(run_id))
        follow = follow_context(request, run_id)  # a followed run's status (issue 50)
        return view, follow, follow_offer(request, run_id, follow)  # or its folder, to follow from here

    try:
        view, follow, offer = await run_in_threadpool(build)
    except BadRunQuery as exc:
        return render_error(request, 422, "This view of the run cannot be drawn", str(exc))
    return render(request, PAGE, PAGE, {"run": view, "follow": follow, "follow_offer": offer})


async def _open_example(request: Request, cat) -> tuple[str, bool]:
    """The shipped run directory opened as `python -m app open` opens one: its log, and its step records into
    the catalog's upload store, linked to their steps."""
    opened = await run_in_threadpool(open_run_dir, RUN_DIR, _store(request), cat.uploads)
    return opened.id, opened.created


@pages.post("/runs/examples/trl")
async def open_run_example(request: Request, cat: CatalogDep) -> Response:
    run_id, _ = await _open_example(request, cat)
    return RedirectResponse(urls.run(run_id), status_code=303)


@api.post("/runs/examples/trl", status_code=201, responses={
    201: {"description": "Stored"}, 200: {"description": "Already stored"},
    422: error("An unknown query parameter; `detail` names it.", ValidationErrorBody),
    507: error("The run store is full (UPLOAD_QUOTA_MB): nothing was stored.")})
async def open_run_example_api(request: Request, cat: CatalogDep) -> JSONResponse:
    """Store the shipped example run (a real TRL 1.16 GRPOTrainer run of 120 steps on CPU, steps 30, 60, 90 and
    120 recorded) as if opened from the command line; its id and explorer URL."""
    run_id, created = await _open_example(request, cat)
    return JSONResponse({"id": run_id, "url": urls.run(run_id)}, status_code=201 if created else 200)


def _number(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)  # JSON has no NaN: "nan", "inf", "-inf"


@api.get("/runs/{run_id}", responses={
    404: error("No run has this id."),
    422: error("`from`/`to` malformed, reversed or holding no logged step, or an unknown parameter.",
               ValidationErrorBody)})
async def run_json(request: Request, run_id: str,
                   first: Annotated[int | None, Query(alias="from", description="The window's first step.")] = None,
                   last: Annotated[int | None, Query(alias="to", description="The window's last step.")] = None,
                   ) -> JSONResponse:
    """A stored run: its logged steps, every metric's (step, value) points in the window (cut by M4 to at most
    4 × 150 a metric: every bucket's first, last, lowest and highest point; "nan"/"inf" as strings), and
    its findings, each with its steps and numbers, and its recorded steps, each a walkthrough of its own."""
    log = await run_in_threadpool(_log, request, run_id)
    try:
        (lo, hi), _ = resolve(log, RunQuery(first, last))
    except BadRunQuery as exc:
        param = {"first": "from", "last": "to"}.get(exc.param, exc.param)
        return JSONResponse({"error": str(exc), "detail": [{"param": param, "message": str(exc), "allowed": None}]},
                            status_code=422)
    recorded = await run_in_threadpool(_store(request).recorded, run_id)  # database rows: off the event loop
    metrics = {}
    for name in log.names:
        points = window(log.series(name), lo, hi)
        kept = downsample(points, BUCKETS)
        metrics[name] = {"logged": len(points), "points": [[s, _number(v)] for s, v in kept]}
    return JSONResponse({
        "id": run_id, "steps": {"first": log.steps[0], "last": log.steps[-1], "count": len(log.steps)},
        "window": {"from": lo, "to": hi}, "summary": {k: _number(v) for k, v in log.summary.items()},
        "metrics": metrics,
        "recorded": [{"step": step, "walkthrough": wid, "url": URLS.walkthrough(wid)}
                     for step, wid in recorded.items()],
        "findings": [{**dataclasses.asdict(f), "numbers": {k: _number(v) for k, v in f.numbers.items()}}
                     for f in findings(log)]})


__all__ = ["install", "store_for"]
