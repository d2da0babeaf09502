"""Route dependencies, as typed aliases (`CatalogDep`, `DeviceDep`, …), id lookups that 404,
and the API's route class, which refuses query parameters a route does not declare.

A route says `cat: CatalogDep` instead of `Annotated[Catalog, Depends(catalog)]`.
"""
from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any, get_args

from fastapi import Depends, Request, Response, UploadFile
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel

from app.domain.catalog import Catalog, CatalogEntry
from app.domain.snapshot import Snapshot
from app.domain.uploads import UploadRejected
from app.web.context import AppContext
from app.web.errors import NotFound, NotRunnable
from app.web.executor import ComputeExecutor
from app.web.kind import KindRegistry
from app.web.schemas.errors import ValidationErrorBody, error


async def read_capped(request: Request, file: UploadFile) -> bytes:
    """Read at most the app's upload limit + 1 (the largest file of any format its kinds open),
    however big the body claims to be; the store then applies the file's own format's limit."""
    kinds: KindRegistry = request.app.state.kinds
    raw = await file.read(kinds.upload_limit + 1)
    if len(raw) > kinds.upload_limit:
        raise UploadRejected(413, f"the file is larger than the upload limit ({kinds.upload_limits})")
    return raw


async def kind_registry(request: Request) -> KindRegistry:
    """The kinds this app serves (app/house.py names them)."""
    return request.app.state.kinds


async def catalog(request: Request) -> Catalog:
    return request.app.state.catalog


async def device(request: Request) -> str:
    return request.app.state.device


async def app_context(request: Request) -> AppContext:
    """This app's own state (app/web/context.py): its job client, limiter, templates, ..."""
    return request.app.state.context


async def compute_executor(request: Request) -> ComputeExecutor:
    """Where a route runs work that may compute (app/web/executor.py)."""
    return request.app.state.compute


def find_entry(cat: Catalog, walkthrough_id: str) -> CatalogEntry:
    try:
        return cat.get(walkthrough_id)
    except KeyError:
        raise NotFound(f"unknown walkthrough {walkthrough_id!r}") from None


def find_loaded(cat: Catalog, walkthrough_id: str) -> CatalogEntry:
    """The entry, with its snapshot and kind, in one lookup; 404 if unknown or failed to load."""
    entry = find_entry(cat, walkthrough_id)
    if entry.snapshot is None:
        raise NotFound(f"walkthrough {walkthrough_id!r} failed to load: {entry.error}")
    return entry


def find_snapshot(cat: Catalog, walkthrough_id: str) -> Snapshot:
    snapshot = find_loaded(cat, walkthrough_id).snapshot
    assert snapshot is not None
    return snapshot


def find_run(cat: Catalog, walkthrough_id: str, kind_id: str, step: str | None, node: str | None,
             refusal: str) -> Snapshot:
    """The snapshot of a walkthrough that kind `kind_id` runs, its `step` and `node` checked: 404 for
    what does not exist, then 409 with `refusal` when another kind (or none) runs it."""
    entry = find_loaded(cat, walkthrough_id)
    assert entry.snapshot is not None
    check_step(entry.snapshot, step)
    check_node(entry.snapshot, node)
    if entry.kind != kind_id:
        raise NotRunnable(refusal)
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
ComputeDep = Annotated[ComputeExecutor, Depends(compute_executor)]
KindsDep = Annotated[KindRegistry, Depends(kind_registry)]
ContextDep = Annotated[AppContext, Depends(app_context)]


# -- strict query strings ------------------------------------------------------------------

UNKNOWN_QUERY = ("A query parameter the route does not take is refused, never ignored: `detail` "
                 "names it and lists the known ones.")


def query_names(dependant: Dependant) -> list[str]:
    """The query keys a route reads: its own parameters and its dependencies' (ParamsDep's
    GRPOQuery among them), a query model counted field by field, as FastAPI reads it."""
    names: list[str] = []
    for field in dependant.query_params:
        model = field.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names += [info.alias or name for name, info in model.model_fields.items()]
        else:
            names.append(field.alias)
    for sub in dependant.dependencies:
        names += query_names(sub)
    return list(dict.fromkeys(names))


def unknown_query(key: str, known: list[str]) -> dict[str, Any]:
    """One pydantic-style error for the 422 handler (app/web/errors.py), which names `key`."""
    listed = ", ".join(known) if known else "none (this route takes no query parameters)"
    return {"type": "extra_forbidden", "loc": ("query", key),
            "msg": f"Unknown query parameter {key!r}; known: {listed}"}


class StrictQueryRoute(APIRoute):
    """A JSON API route that answers 422 to a query parameter it does not declare
    (`clip_eps=0.9` would otherwise run with the default ε), and documents that 422."""

    def __init__(self, path: str, endpoint: Callable[..., Any], *,
                 responses: dict[int | str, dict[str, Any]] | None = None, **kwargs: Any) -> None:
        responses = dict(responses or {})
        key: int | str = "422" if "422" in responses else 422
        entry = dict(responses.get(key) or error(UNKNOWN_QUERY, ValidationErrorBody))
        model = entry.get("model")
        if model is not ValidationErrorBody and ValidationErrorBody not in get_args(model):
            raise TypeError(f"{path}: its 422 must document ValidationErrorBody, the body sent")
        if UNKNOWN_QUERY not in entry["description"]:  # routers copy routes: add it once
            entry["description"] = f"{entry['description']} {UNKNOWN_QUERY}"
        responses[key] = entry
        super().__init__(path, endpoint, responses=responses, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        known = sorted(query_names(self.dependant))
        allowed = frozenset(known)

        async def strict(request: Request) -> Response:
            unknown = [k for k in request.query_params.keys() if k not in allowed]
            if unknown:
                raise RequestValidationError([unknown_query(k, known) for k in unknown])
            return await handler(request)

        return strict
