"""JSON API of recorded steps: the step-record format's JSON Schema, and a record's recomputed
numbers (per group and completion: each token's values and ∂loss/∂log π; per node its tensor
and gradient). Thin: the engine does the work."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.kinds.step_record.domain.kind_id import KIND_ID
from app.kinds.step_record.domain.record import record_json_schema
from app.kinds.step_record.web.payload import record_payload
from app.web.deps import CatalogDep, ComputeDep, StrictQueryRoute, find_loaded, find_run
from app.web.errors import NotFound
from app.web.json_body import accepts_gzip, json_response
from app.web.schemas.base import AsBuilt
from app.web.schemas.errors import BUSY, ValidationErrorBody, error

router = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)


@router.get("/schemas/step-record", response_model=AsBuilt, responses={
    422: error("An unknown query parameter (this route takes none).", ValidationErrorBody)})
def step_record_schema() -> dict:
    """The GRPO step-record format (docs/reference/step-record.md) as JSON Schema (draft 2020-12)."""
    return record_json_schema()


# The step's JSON, run by the house's /api/walkthroughs/{id}/step for recorded steps (web/kind.py)
RECORD_RESPONSES = {
    404: error("Unknown walkthrough, node, group or completion."),
    409: error("The walkthrough is not a recorded step."),
    422: error("A parameter is malformed or unknown; `detail` names it.", ValidationErrorBody),
    503: BUSY,
}


async def get_record(request: Request, walkthrough_id: str, cat: CatalogDep, compute: ComputeDep,
                     group: Annotated[int, Query(ge=0, description="The group to send.")] = 0,
                     completion: Annotated[int | None, Query(ge=0, description="Only this completion of "
                                                                             "the group.")] = None,
                     node: Annotated[str | None, Query(description="Send this node's tensor and gradient "
                                                                   "(the group's rows) instead of the tokens.")] = None,
                     ) -> Response:
    """A recorded step recomputed under its own conventions: the run, the checks of every logged metric
    against the recomputation, the metrics, and for one group each completion's tokens with log π, log
    π_old, log π_ref, ρ, clip flags, KL, weight w and ∂loss/∂log π (`grad`) with its two parts,
    `grad_surrogate` (from the clipped advantage term) and `grad_kl` (from the KL penalty β·KL; they add
    up to `grad`); with `node`, that node's value and ∂loss/∂value for the group's rows."""
    find_run(cat, walkthrough_id, KIND_ID, None, node, f"walkthrough {walkthrough_id!r} is not a recorded step")
    entry = find_loaded(cat, walkthrough_id)
    if group >= len(entry.payload.groups):
        raise NotFound(f"the record has {len(entry.payload.groups)} group(s): no group {group}")
    gzip_ok = accepts_gzip(request)
    return await compute.run_in_app(_record, walkthrough_id, group, completion, node, gzip_ok)


def _record(app, walkthrough_id: str, group: int, completion: int | None, node: str | None,
            gzip_ok: bool) -> Response:
    entry = app.state.catalog.get(walkthrough_id)
    try:
        body = record_payload(entry.id, entry.payload, group, completion, node)
    except LookupError as exc:
        raise NotFound(str(exc)) from None
    return json_response(body, gzip_ok)
