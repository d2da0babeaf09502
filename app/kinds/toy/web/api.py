"""The toy's JSON API: its live tensors (the step's JSON, at the house's address) and Compare mode (its own
route). Thin: the engine does the work."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError

from app.domain.snapshot import Snapshot
from app.engine.grpo.params import Conventions
from app.kinds.toy.domain.kind_id import KIND_ID
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine import process_jobs
from app.kinds.toy.engine.compare import compare_step
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.select import step_for_view
from app.kinds.toy.web.deps import CompareDep, ParamsDep, ProcessesDep, find_process, find_stage
from app.kinds.toy.web.schemas.compare import CompareBody, compare_payload
from app.kinds.toy.web.schemas.tensors import TensorsBody, tensors_payload
from app.views.urls import URLS
from app.web.deps import (
    CatalogDep,
    ComputeDep,
    StrictQueryRoute,
    find_run,
    find_snapshot,
)
from app.web.jobs.wait import await_jobs
from app.web.json_body import accepts_gzip, json_response
from app.web.schemas.base import AsBuilt
from app.web.schemas.errors import BUSY, NotStartedBody, ValidationErrorBody, error

router = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)


# Routes send the builders' dicts as they are (response_model=AsBuilt: no validation, same
# bytes as `-> dict`); `responses` names the model each body follows, for the document.
# StrictQueryRoute refuses (422) and documents unknown query parameters on every route.

UNKNOWN = error("Unknown walkthrough, or one whose file failed to load.")
VIEW_ONLY = error("The walkthrough is view-only: no runnable model matches its nodes.")


# The step's JSON, run by the house's /api/walkthroughs/{id}/step for the toy's walkthroughs (web/kind.py)
TENSORS_RESPONSES = {
    200: {"model": TensorsBody, "description": "The step's tensors."},
    404: error("Unknown walkthrough, step, node, process or stage, or (with `process`) a path's run nobody has "
               "started (a GET never starts one): `start` names the POST that does.", NotStartedBody),
    409: VIEW_ONLY,
    422: error("A parameter is out of range or malformed, `stage` came without `process`, or the "
               "parameters make training diverge; `detail` names each parameter.", ValidationErrorBody),
    503: BUSY,
}


async def get_tensors(
    request: Request,
    walkthrough_id: str,
    cat: CatalogDep,
    processes: ProcessesDep,
    params: ParamsDep,
    compute: ComputeDep,
    step: Annotated[str | None, Query(description="Only the nodes visible in this step's view.")] = None,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
    process: Annotated[str | None, Query(description="A training path (r1-zero, r1, distillation): show "
                                         "its stage's last training step instead of the walkthrough's step. "
                                         "Uses `seed` and `prompt`; other GRPO parameters are the stage's own.",
                                         )] = None,
    stage: Annotated[str | None, Query(description="The process stage (default: its last).")] = None,
) -> Response:
    gzip_ok = accepts_gzip(request)
    find_run(cat, walkthrough_id, KIND_ID, step, node,
             f"walkthrough {walkthrough_id!r} is view-only: no runnable model matches its nodes")
    if process is None:
        if stage is not None:
            raise RequestValidationError([{"loc": ("query", "stage"), "type": "value_error",
                                           "msg": "needs a process: add process=r1-zero, r1 or distillation"}])
        return await compute.run_in_app(_tensors, walkthrough_id, step, node, params, gzip_ok)
    proc = find_process(processes, process)
    stage_id = find_stage(proc, stage).id if stage is not None else proc.default_stage.id
    await await_jobs(request.app.state.context.jobs, [process_jobs.process_job(processes, proc.id, params.seed)],
                     start=f"POST {URLS.paths_api(walkthrough_id, proc.id, {'seed': str(params.seed)})}")
    return await compute.run_in_app(_tensors, walkthrough_id, step, node, params, gzip_ok, proc.id, stage_id)


def _tensors(app, walkthrough_id: str, step: str | None, node: str | None, params: GRPOParams, gzip_ok: bool,
             *process_stage: str) -> Response:
    """On the compute executor (a worker process): the step (computed on a cache miss), its
    payload, its JSON text and, if the client takes it, its gzip. Not in the web process: a
    G = 4096 body is ~1 MB of floats, whose encoding there kept /healthz waiting. The worker's
    own app gives the snapshot, device and paths (the route checked the ids: only values cross)."""
    snapshot: Snapshot = find_snapshot(app.state.catalog, walkthrough_id)
    processes: ProcessCatalog = app.state.processes
    body = tensors_payload(walkthrough_id, snapshot, step_for_view(params, app.state.device, processes,
                                                                   *process_stage, jobs=app.state.context.jobs),
                            step, node)
    if process_stage:
        body = {"process": process_stage[0], "stage": process_stage[1], **body}
    return json_response(body, gzip_ok)


@router.get("/walkthroughs/{walkthrough_id}/compare", response_model=AsBuilt, responses={
    200: {"model": CompareBody},
    404: error("Unknown walkthrough, step or node."),
    409: VIEW_ONLY,
    422: error("A parameter of side A or a vs_ parameter of side B is out of range or malformed, or the "
               "parameters make training diverge; `detail` names each parameter.", ValidationErrorBody),
    503: BUSY,
})
async def get_compare(
    request: Request,
    walkthrough_id: str,
    cat: CatalogDep,
    params: ParamsDep,
    conventions_b: CompareDep,
    compute: ComputeDep,
    step: Annotated[str | None, Query(description="Only the nodes visible in this step's view.")] = None,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
) -> Response:
    """Compare mode: the step of the ordinary parameters (side A) and the same policy, group and
    rewards under the `vs_` conventions (side B: `vs_preset`, default deepseekmath, then any
    `vs_<convention>`), with every node's gradient change ‖∇a − ∇b‖ / ‖∇a‖."""
    gzip_ok = accepts_gzip(request)
    find_run(cat, walkthrough_id, KIND_ID, step, node,
             f"walkthrough {walkthrough_id!r} is view-only: no runnable model matches its nodes")
    return await compute.run_in_app(_compare, walkthrough_id, step, node, params, conventions_b, gzip_ok)


def _compare(app, walkthrough_id: str, step: str | None, node: str | None, params: GRPOParams,
             conventions_b: Conventions, gzip_ok: bool) -> Response:
    """On the compute executor, like _tensors: both runs (cached), the payload, its JSON and gzip."""
    snapshot: Snapshot = find_snapshot(app.state.catalog, walkthrough_id)
    body = compare_payload(walkthrough_id, snapshot, compare_step(params, conventions_b, app.state.device), step, node)
    return json_response(body, gzip_ok)


