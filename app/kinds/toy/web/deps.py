"""The toy's route dependencies: GRPOParams and Compare mode's side B from the query string, the
training-path catalog, and lookups that 404. Refusals carry their allowed range (web/errors.py)."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from app.engine.grpo.params import Conventions
from app.kinds.toy.domain.process_spec import Process, ProcessCatalog, Stage
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.views.form import allowed_range
from app.kinds.toy.views.url_state import COMPARE_KEYS, parse_compare
from app.views.urls import COMPARE_PREFIX
from app.web.conventions_query import query_field
from app.web.errors import NotFound


def _name(err) -> str:
    return str(err["loc"][0]) if err.get("loc") else ""


# The query-string face of GRPOParams, so OpenAPI documents every parameter.
GRPOQuery = create_model(
    "GRPOQuery", __config__=ConfigDict(extra="ignore"),
    **{name: query_field(name, f) for name, f in GRPOParams.model_fields.items()},
)


def _side_b_field(key: str):
    name = key.removeprefix("vs_")
    annotation, info = query_field(name, Conventions.model_fields[name])
    return annotation, FieldInfo.merge_field_infos(info, description=f"Side B: {info.description}")


# Side B of /compare: `vs_<convention>` for each convention, documented like side A's.
CompareQuery = create_model("CompareQuery", __config__=ConfigDict(extra="ignore"),
                            **{key: _side_b_field(key) for key in COMPARE_KEYS})


# The dependencies are `async def`: a sync one would take a thread of the request pool each time.

async def grpo_params(query: Annotated[GRPOQuery, Query()]) -> GRPOParams:
    """Validate with the engine's own rules; refusals become 422s naming the parameter."""
    try:
        return GRPOParams(**query.model_dump(exclude_none=True))
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"]), "allowed": allowed_range(_name(e))}
                                      for e in exc.errors()]) from None


async def compare_conventions(request: Request, query: Annotated[CompareQuery, Query()]) -> Conventions:
    """Side B: `Conventions(preset=vs_preset or "deepseekmath", **other vs_ fields)`, parsed as the
    page parses it (views/url_state.parse_compare); refusals are 422s naming the vs_ parameter."""
    parsed = parse_compare(request.query_params)
    if parsed.errors:  # side B has side A's ranges
        raise RequestValidationError([{**e, "allowed": allowed_range(str(e["loc"][1]).removeprefix(COMPARE_PREFIX))}
                                      for e in parsed.validation_errors()])
    return parsed.conventions or Conventions()


async def process_catalog(request: Request) -> ProcessCatalog:
    return request.app.state.processes


def find_process(processes: ProcessCatalog, process_id: str) -> Process:
    try:
        return processes.get(process_id)
    except KeyError:
        raise NotFound(f"unknown process {process_id!r} (processes: {', '.join(processes.ids)})") from None


def find_stage(process: Process, stage_id: str) -> Stage:
    try:
        return process.stage(stage_id)
    except KeyError:
        known = ", ".join(s.id for s in process.stages)
        raise NotFound(f"process {process.id!r} has no stage {stage_id!r} (stages: {known})") from None




ParamsDep = Annotated[GRPOParams, Depends(grpo_params)]
ProcessesDep = Annotated[ProcessCatalog, Depends(process_catalog)]
CompareDep = Annotated[Conventions, Depends(compare_conventions)]
