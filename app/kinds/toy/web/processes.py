"""JSON API of the training paths: definitions, runs with curves, and a comparison. Thin."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.engine.jobs.tasks import Job
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.process_jobs import process_job, process_run
from app.kinds.toy.web.deps import ProcessesDep, find_process
from app.kinds.toy.web.schemas.processes import (
    ComparisonBody,
    ProcessesBody,
    ProcessRunBody,
    comparison_payload,
    process_run_payload,
    processes_payload,
)
from app.web.deps import ComputeDep, StrictQueryRoute
from app.web.jobs.start import start_jobs
from app.web.jobs.wait import await_jobs
from app.web.schemas.base import AsBuilt
from app.web.schemas.errors import BUSY, INVALID, NotStartedBody, error

router = APIRouter(prefix="/api/processes", tags=["processes"], route_class=StrictQueryRoute)

Seed = Annotated[int, Query(ge=0, le=2**31 - 1, description="Seeds every sampling step of the path.")]
Scale = Annotated[int, Query(ge=1, le=8, description="Multiplies every stage's iteration count.")]


# The builders' dicts are sent as they are (AsBuilt); `responses` documents their models.

@router.get("", response_model=AsBuilt, responses={200: {"model": ProcessesBody}})
def list_processes(processes: ProcessesDep) -> dict:
    return processes_payload(processes)


NOT_STARTED = error("A run nobody has started (a GET never starts one): `start` names the POST that does.",
                    NotStartedBody)
TOO_MANY = error("This client has started its share of runs: nothing was stored; see Retry-After.")
FULL = error("The queue of runs is full, or every compute slot is taken: nothing was stored; see Retry-After.")


@router.get("/compare", response_model=AsBuilt, responses={200: {"model": ComparisonBody}, 404: NOT_STARTED,
                                                           422: INVALID, 503: BUSY})
async def compare(request: Request, processes: ProcessesDep, compute: ComputeDep, seed: Seed = 0,
                  iterations_scale: Scale = 1) -> dict:
    """Every path's run side by side, once they are computed (POST this address to start them)."""
    await await_jobs(_jobs(request), _runs(processes, processes.ids, seed, iterations_scale), start=_start(request))
    return await compute.run_in_app(_compare, processes, seed, iterations_scale)


@router.post("/compare", response_model=AsBuilt, responses={200: {"model": ComparisonBody}, 422: INVALID,
                                                            429: TOO_MANY, 503: FULL})
async def start_compare(request: Request, processes: ProcessesDep, compute: ComputeDep, seed: Seed = 0,
                        iterations_scale: Scale = 1) -> dict:
    """Start every path's run (those not started yet), wait for them (a toy run takes about a second),
    then answer as the GET does."""
    await start_jobs(request, _runs(processes, processes.ids, seed, iterations_scale))
    await await_jobs(_jobs(request), _runs(processes, processes.ids, seed, iterations_scale))
    return await compute.run_in_app(_compare, processes, seed, iterations_scale)


def _compare(app, processes: ProcessCatalog, seed: int, iterations_scale: int) -> dict:
    """On the compute executor: every path's run, read with the app's job client (the worker's own)."""
    runs = [process_run(app.state.context.jobs, processes, pid, seed, iterations_scale) for pid in processes.ids]
    return comparison_payload(processes, runs)


@router.get("/{process_id}", response_model=AsBuilt, responses={
    200: {"model": ProcessRunBody}, 404: error("Unknown process, or a run nobody has started (a GET never starts "
                                               "one): `start` names the POST that does.", NotStartedBody),
    422: INVALID, 503: BUSY})
async def get_process_run(request: Request, process_id: str, processes: ProcessesDep, compute: ComputeDep,
                          seed: Seed = 0, iterations_scale: Scale = 1) -> dict:
    find_process(processes, process_id)
    await await_jobs(_jobs(request), _runs(processes, [process_id], seed, iterations_scale), start=_start(request))
    return await compute.run_in_app(_process_run, processes, process_id, seed, iterations_scale)


@router.post("/{process_id}", response_model=AsBuilt, responses={
    200: {"model": ProcessRunBody}, 404: error("Unknown process."), 422: INVALID, 429: TOO_MANY, 503: FULL})
async def start_process_run(request: Request, process_id: str, processes: ProcessesDep, compute: ComputeDep,
                            seed: Seed = 0, iterations_scale: Scale = 1) -> dict:
    """Start the path's run if nobody has, wait for it (about a second), then answer as the GET does."""
    find_process(processes, process_id)
    await start_jobs(request, _runs(processes, [process_id], seed, iterations_scale))
    await await_jobs(_jobs(request), _runs(processes, [process_id], seed, iterations_scale))
    return await compute.run_in_app(_process_run, processes, process_id, seed, iterations_scale)


def _process_run(app, processes: ProcessCatalog, process_id: str, seed: int, iterations_scale: int) -> dict:
    run = process_run(app.state.context.jobs, processes, process_id, seed, iterations_scale)
    return process_run_payload(processes, run)


def _runs(processes: ProcessCatalog, ids, seed: int, iterations_scale: int) -> list[Job]:
    return [process_job(processes, pid, seed, iterations_scale) for pid in ids]


def _jobs(request: Request):
    return request.app.state.context.jobs  # the app's job client (app/web/context.py)


def _start(request: Request) -> str:
    return f"POST {request.url.path}" + (f"?{request.url.query}" if request.url.query else "")
