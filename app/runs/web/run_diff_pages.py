"""The diff of two recorded steps of a run (issue 34). Thin: the run store says which steps were recorded and
under which upload, the engine (engine/run_diff.py) recomputes both records and compares them, the view
(views/run_diff.py) words it.

- `GET /runs/{id}/diff?a=STEP&b=STEP`: the page. 404 for no such run; a/b missing, not a number, not a recorded
  step, or the same step twice, and any other parameter: a 422 page naming the field.
- `GET /api/runs/{id}/diff?a=&b=`: its JSON twin, 422 bodies naming the field.
"""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.kinds.step_record.domain.record import StepRecord
from app.runs.domain.run_store import RunStore
from app.runs.engine.run_diff import RunDiff, diff_steps
from app.runs.views.run_diff import run_diff_page
from app.runs.views.run_diff_json import diff_body
from app.runs.views.run_diff_query import check_pair, compare_form, read_pair
from app.runs.views.run_view import BadRunQuery
from app.web.deps import CatalogDep, StrictQueryRoute
from app.web.errors import NotFound
from app.web.rendering import render, render_error
from app.web.schemas.errors import BUSY, ValidationErrorBody, error

PAGE = "run_explorer/run_diff.html"

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)


def install(app: FastAPI) -> None:
    """After run_pages.install: its run store is this page's."""
    # the explorer's "Compare two recorded steps"
    app.state.context.templates.env.globals["run_diff_form"] = compare_form


def _recorded(request: Request, run_id: str) -> dict[int, str]:
    store: RunStore = request.app.state.run_store
    if store.get(run_id) is None:
        raise NotFound(f"no run {run_id!r} here (runs are stored by `python -m app open RUN_DIR` or the "
                       "example's button on the upload page)")
    return store.recorded(run_id)


def _record(cat, step: int, walkthrough_id: str) -> tuple[int, str, StepRecord]:
    try:
        entry = cat.get(walkthrough_id)
    except KeyError:
        raise NotFound(f"step {step}'s record (walkthrough {walkthrough_id!r}) is not in this server's "
                       "uploads") from None
    if not isinstance(entry.payload, StepRecord):
        raise NotFound(f"walkthrough {walkthrough_id!r}, linked to step {step}, is not a recorded step")
    return step, entry.id, entry.payload


def _diff(cat, recorded: dict[int, str], a: int, b: int) -> RunDiff:
    return diff_steps(_record(cat, a, recorded[a]), _record(cat, b, recorded[b]))


@pages.get("/runs/{run_id}/diff")
async def run_diff(request: Request, run_id: str, cat: CatalogDep) -> Response:
    recorded = await run_in_threadpool(_recorded, request, run_id)
    try:
        a, b = read_pair(request.query_params.multi_items(), recorded)
    except BadRunQuery as exc:
        return render_error(request, 422, "These two steps cannot be compared", str(exc))
    diff = await run_in_threadpool(_diff, cat, recorded, a, b)
    return render(request, PAGE, PAGE, {"diff": run_diff_page(run_id, diff, recorded)})


@api.get("/runs/{run_id}/diff", responses={
    404: error("No run has this id."),
    422: error("`a` or `b` missing, not a whole number, not a recorded step of this run (the message lists "
               "them), or both the same step.", ValidationErrorBody),
    503: BUSY})
async def run_diff_json(request: Request, run_id: str, cat: CatalogDep,
                        a: Annotated[int | None, Query(description="The first recorded step.")] = None,
                        b: Annotated[int | None, Query(description="The second recorded step.")] = None,
                        ) -> JSONResponse:
    """Two recorded steps of a stored run, each record recomputed under its own conventions: for the policy
    ratio, KL to the reference and entropy (per trained token; null where not recorded) and the advantage,
    length and reward (per completion), each step's count, mean, p5/p50/p95, min and max, the shift of the mean
    and median (b − a), the two-sample KS distance and both steps' counts on shared histogram bins; the
    prompts both steps share (mean reward, mean length, share tied: each step's and the change, largest
    |change| first); the tokens whose mean log π_θ rose or fell most."""
    recorded = await run_in_threadpool(_recorded, request, run_id)
    try:
        a, b = check_pair(a, b, recorded)
    except BadRunQuery as exc:
        return JSONResponse({"error": str(exc), "detail": [{"param": exc.param, "message": str(exc),
                                                            "allowed": None}]}, status_code=422)
    diff = await run_in_threadpool(_diff, cat, recorded, a, b)
    return JSONResponse(diff_body(run_id, diff, recorded))


__all__ = ["install"]
