"""One path API for every kind: a training path is a job in the store; POST starts it (or a failed
one again), GET reads it and never starts one. Thin: app/engine/jobs does the work."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.engine.jobs.client import JobClient, NotStarted
from app.engine.jobs.tasks import Job
from app.stores.jobs import JobRecord
from app.web.conventions_query import ConventionsQuery
from app.web.deps import CatalogDep, StrictQueryRoute, find_loaded
from app.web.errors import NotFound, NotRunnable
from app.web.jobs.start import start_jobs
from app.web.schemas.errors import INVALID, NotStartedBody, error
from app.web.schemas.jobs import PathJobBody, job_payload

router = APIRouter(prefix="/api", tags=["paths"], route_class=StrictQueryRoute)

Seed = Annotated[int | None, Query(ge=0, le=2**31 - 1, description="Seeds every sampling step of the path "
                                   "(default: the kind's own).")]
Scale = Annotated[float | None, Query(description="For kinds whose paths train by steps: every stage's "
                                      "steps multiplied, 0.01 to 1 (1, the default, is the walkthrough's run).")]
IterationsScale = Annotated[int | None, Query(description="For kinds whose paths train by iterations: every "
                                              "stage's iterations multiplied, 1 to 8 (default 1).")]


async def given_conventions(query: Annotated[ConventionsQuery, Query()]) -> dict[str, Any]:
    """The conventions named in the URL (`preset` and any override), for every GRPO stage of the path;
    none: the path's own (the kind's default conventions)."""
    return query.model_dump(exclude_none=True)


GivenConventions = Annotated[dict[str, Any], Depends(given_conventions)]
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": PathJobBody, "description": "Done (with `result`) or failed (with `error`)."},
    202: {"model": PathJobBody, "description": "Queued or running: poll the same URL (a queued run nobody "
                                               "reads for 60 s expires)."},
    404: error("Unknown walkthrough, a path its kind does not have, or (GET) a run nobody has started: "
               "`start` names the POST that starts it.", NotStartedBody),
    409: error("The walkthrough is view-only: no engine of this app runs it, so it has no paths."),
    422: INVALID,
    503: error("The job store cannot be reached just now, or (POST) the queue of runs is full: nothing was "
               "stored; try again.", headers=RETRY_AFTER),
}
POST_RESPONSES: dict[int | str, dict[str, Any]] = {
    **RESPONSES, 429: error("This client has started its share of runs (JOB_STARTS_BURST, then "
                            "JOB_STARTS_PER_MIN): nothing was stored.", headers=RETRY_AFTER)}


def _job(request: Request, cat, walkthrough_id: str, path: str, query: dict[str, Any]) -> Job:
    entry = find_loaded(cat, walkthrough_id)
    kind = request.app.state.kinds.get(entry.kind)
    if kind is None or kind.path_job is None:
        raise NotRunnable(f"walkthrough {walkthrough_id!r} is view-only: it has no training paths")
    try:
        return kind.path_job(request, entry, path, query)
    except KeyError:
        raise NotFound(f"no training path {path!r} for walkthrough {walkthrough_id!r}") from None
    except ValueError as exc:  # "param: why", answered by the app's own 422 handler (web/errors.py)
        param, _, message = str(exc).partition(": ")
        raise RequestValidationError([{"loc": ("query", param), "type": "value_error",
                                       "msg": message or str(exc)}]) from None


def _answer(jobs: JobClient, job: JobRecord) -> JSONResponse:
    result = None
    if job.state == "done":
        value = jobs.result(job)
        result = None if value is None else jobs.task(job.task).answer(job.params, value)
    status = 200 if job.finished else 202
    # Only a done job's answer may be kept by caches: a failed one can be started again, a running one moves.
    headers = {} if job.state == "done" else {"Cache-Control": "no-store"}
    return JSONResponse(job_payload(job, result), status_code=status, headers=headers)


def _query(seed: int | None, scale: float | None, iterations_scale: int | None,
           conventions: dict[str, Any]) -> dict[str, Any]:
    return {"seed": seed, "scale": scale, "iterations_scale": iterations_scale, "conventions": conventions}


@router.get("/walkthroughs/{walkthrough_id}/paths/{path}", responses=RESPONSES, response_model=None)
def get_path(request: Request, walkthrough_id: str, path: str, cat: CatalogDep, conventions: GivenConventions,
             seed: Seed = None, scale: Scale = None, iterations_scale: IterationsScale = None) -> JSONResponse:
    """A training path of this walkthrough's kind, as its job stands: done, failed, queued or running.
    A GET never starts one (a link, a prefetcher or a crawler costs nothing): a run nobody started is a
    404 naming the POST that starts it. Reading a queued run keeps it wanted."""
    needed = _job(request, cat, walkthrough_id, path, _query(seed, scale, iterations_scale, conventions))
    jobs = request.app.state.context.jobs
    job = jobs.find(needed)
    if job is None:
        raise NotStarted([jobs.spec(needed).title])
    return _answer(jobs, job)


@router.post("/walkthroughs/{walkthrough_id}/paths/{path}", responses=POST_RESPONSES, response_model=None)
async def start_path(request: Request, walkthrough_id: str, path: str, cat: CatalogDep,
                     conventions: GivenConventions, seed: Seed = None, scale: Scale = None,
                     iterations_scale: IterationsScale = None) -> JSONResponse:
    """Start a training path on the server (a failed one again; one queued, running or done is read as
    it is): computed once by one runner for every worker and replica, kept until an operator deletes
    it (`python -m app.jobs delete ID`). Limited per client (429) and by the queue's bound (503)."""
    needed = _job(request, cat, walkthrough_id, path, _query(seed, scale, iterations_scale, conventions))
    (job,) = await start_jobs(request, [needed])
    return await run_in_threadpool(_answer, request.app.state.context.jobs, job)


def install(app) -> None:
    app.include_router(router)
