"""Route dependencies, as typed aliases (`CatalogDep`, `DeviceDep`, …), and id lookups that 404.

A route says `cat: CatalogDep` instead of `Annotated[Catalog, Depends(catalog)]`.
"""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..domain.catalog import Catalog, CatalogEntry
from ..domain.process_spec import Process, ProcessCatalog, Stage
from ..domain.snapshot import Snapshot
from ..domain.uploads import MAX_BYTES, UploadRejected
from ..engine.params import GRPOParams
from .errors import NotFound


def _query_field(name: str, field: FieldInfo):
    # Every parameter is optional in a URL (absent = default); `rewards` travels
    # as one comma-separated string, not a repeated query key.
    annotation = str | None if name == "rewards" else field.annotation | None
    return annotation, FieldInfo.merge_field_infos(field, default=None)


# The query-string face of GRPOParams, so OpenAPI documents every parameter.
GRPOQuery = create_model(
    "GRPOQuery", __config__=ConfigDict(extra="ignore"),
    **{name: _query_field(name, f) for name, f in GRPOParams.model_fields.items()},
)


def grpo_params(query: Annotated[GRPOQuery, Query()]) -> GRPOParams:
    """Validate with the engine's own rules; refusals become 422s naming the parameter."""
    try:
        return GRPOParams(**query.model_dump(exclude_none=True))
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]) from None


def process_catalog(request: Request) -> ProcessCatalog:
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


async def read_capped(file: UploadFile) -> bytes:
    """Read at most MAX_BYTES + 1: the cap holds however big the body claims to be."""
    raw = await file.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise UploadRejected(413, "the file is larger than the 2 MB limit")
    return raw


def catalog(request: Request) -> Catalog:
    return request.app.state.catalog


def device(request: Request) -> str:
    return request.app.state.device


def find_entry(cat: Catalog, walkthrough_id: str) -> CatalogEntry:
    try:
        return cat.get(walkthrough_id)
    except KeyError:
        raise NotFound(f"unknown walkthrough {walkthrough_id!r}") from None


def find_snapshot(cat: Catalog, walkthrough_id: str) -> Snapshot:
    entry = find_entry(cat, walkthrough_id)
    if entry.snapshot is None:
        raise NotFound(f"walkthrough {walkthrough_id!r} failed to load: {entry.error}")
    return entry.snapshot


def check_step(snapshot: Snapshot, step_id: str | None) -> None:
    if step_id is not None and step_id not in {s.id for s in snapshot.steps}:
        known = ", ".join(s.id for s in snapshot.steps)
        raise NotFound(f"unknown step {step_id!r} (steps: {known})")


def check_node(snapshot: Snapshot, node_id: str | None) -> None:
    if node_id is not None and node_id not in snapshot.node_ids:
        raise NotFound(f"unknown node {node_id!r}")


CatalogDep = Annotated[Catalog, Depends(catalog)]
DeviceDep = Annotated[str, Depends(device)]
ProcessesDep = Annotated[ProcessCatalog, Depends(process_catalog)]
ParamsDep = Annotated[GRPOParams, Depends(grpo_params)]
