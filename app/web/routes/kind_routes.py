"""The addresses the house owns and the kinds fill (issue 51): one URL scheme for every kind.

- `/api/walkthroughs/{walkthrough_id}/step`: the step's JSON, whatever the kind (GET reads; POST, for a kind
  whose step is a job, starts it). Each kind gives its handler (`Kind.step_api`).
- `/walkthroughs/{walkthrough_id}/paths/{path}`: a training path's box on the step page, the fragment it polls
  and posts its Run to (`Kind.paths_panel`). The paths' JSON is `/api/walkthroughs/{id}/paths/{path}`
  (web/jobs/paths_api.py, every kind's through `Kind.path_job`).
- A kind's old addresses (`Kind.moved`) answer 308 to these, the query kept; the routes only one kind has
  (`Kind.routers`) are included as its manifest names them.

The house's one route per address and method finds the walkthrough's kind and runs that kind's handler as
FastAPI runs any route (its parameters, dependencies, validation, strict query), so a kind brings a typed
endpoint, never a router for a shared address. The document (/docs) states every kind's parameters and
answers on the one operation.
"""
from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Union
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict
from starlette.responses import RedirectResponse, Response

from app.views.urls import PATHS_PANEL, STEP_API
from app.web.deps import StrictQueryRoute, find_loaded
from app.web.errors import NotFound, NotRunnable
from app.web.kind import Kind, KindRegistry, KindRoute, Moved

UNMODELLED = "The step's JSON (its fields: docs/reference/json-api.md)."


class StepJSON(BaseModel):
    """A kind's step JSON whose fields no model states yet (docs/reference/json-api.md lists them)."""
    model_config = ConfigDict(extra="allow")


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def install(app: FastAPI, registry: KindRegistry) -> None:
    """The house's addresses, then the kinds' own routes and their old addresses' redirects."""
    _dispatch(app, registry, STEP_API, lambda k: k.step_api, tags=["api"], refuse=_view_only,
              summary="The step's JSON, for a walkthrough of any kind")
    _dispatch(app, registry, PATHS_PANEL, lambda k: k.paths_panel, tags=None, refuse=_no_paths)
    for kind in registry.kinds:
        for router in kind.routers:
            app.include_router(router)
    for moved in (m for k in registry.kinds for m in k.moved):
        app.router.add_route(moved.old, _redirect(moved), methods=["GET", "POST"], include_in_schema=False)


def _view_only(walkthrough_id: str, kind: Kind | None) -> Exception:
    if kind is None:
        return NotRunnable(f"walkthrough {walkthrough_id!r} is view-only: no runnable model matches its nodes")
    return NotRunnable(f"walkthrough {walkthrough_id!r} ({kind.title}) has no step JSON")


def _no_paths(walkthrough_id: str, _kind: Kind | None) -> Exception:
    return NotFound(f"no training path box for walkthrough {walkthrough_id!r}")


def _dispatch(app: FastAPI, registry: KindRegistry, path: str, hooks: Callable[[Kind], tuple[KindRoute, ...]], *,
              tags: list[str] | None, refuse: Callable[[str, Kind | None], Exception], summary: str | None = None,
              ) -> None:
    methods = list(dict.fromkeys(m for k in registry.kinds for r in hooks(k) for m in r.methods))
    for method in methods:
        inner = {k.id: _inner_route(app, path, r, method) for k in registry.kinds for r in hooks(k)
                 if method in r.methods}
        handlers: dict[str, Handler] = {kind_id: route.get_route_handler() for kind_id, route in inner.items()}
        titles = {k.id: k.title for k in registry.kinds}
        endpoint = _endpoint(registry, handlers, refuse, with_path="{path}" in path)
        documented = tags is not None
        app.add_api_route(path, endpoint, methods=[method], response_model=None,
                          include_in_schema=documented, tags=tags, summary=summary,
                          name=f"{path.rsplit('/', 1)[-1]}_{method.lower()}",
                          responses=_merged_responses(inner, titles) if documented else None,
                          openapi_extra={"parameters": _parameters(inner, titles)} if documented else None)


def _inner_route(app: FastAPI, path: str, hook: KindRoute, method: str) -> APIRoute:
    route_class = StrictQueryRoute if hook.strict else APIRoute
    return route_class(path, hook.endpoint, methods=[method], responses=dict(hook.responses), response_model=None,
                       dependency_overrides_provider=app)


def _endpoint(registry: KindRegistry, handlers: dict[str, Handler], refuse: Callable[[str, Kind | None], Exception],
              *, with_path: bool) -> Callable[..., Coroutine[Any, Any, Response]]:
    """The house's endpoint: the walkthrough's kind's handler, run on the same request."""
    async def dispatch(request: Request, walkthrough_id: str) -> Response:
        entry = find_loaded(request.app.state.catalog, walkthrough_id)
        handler = handlers.get(entry.kind or "")
        if handler is None:
            raise refuse(walkthrough_id, registry.get(entry.kind))
        return await handler(request)

    if not with_path:
        return dispatch

    async def dispatch_path(request: Request, walkthrough_id: str, path: str) -> Response:
        return await dispatch(request, walkthrough_id)  # `path` declared so the document names it

    return dispatch_path


def _merged_responses(inner: dict[str, APIRoute], titles: dict[str, str]) -> dict[int | str, dict[str, Any]]:
    """Every kind's documented answers on the one operation: per status the union of their bodies, and
    what each kind means by it."""
    merged: dict[int | str, dict[str, Any]] = {}
    by_status: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for kind_id, route in inner.items():
        for status, spec in route.responses.items():
            by_status.setdefault(str(status), []).append((kind_id, spec))
        if not any(str(status) == "200" for status in route.responses):  # its body has no model: say so
            by_status.setdefault("200", []).append((kind_id, {"model": StepJSON, "description": UNMODELLED}))
    for status, specs in sorted(by_status.items()):
        models = list(dict.fromkeys(m for _, spec in specs for m in _models(spec.get("model"))))
        descriptions = list(dict.fromkeys(spec.get("description", "") for _, spec in specs))
        text = descriptions[0] if len(descriptions) == 1 else " ".join(
            f"{titles[kind_id].split(':')[0]}: {spec.get('description', '')}" for kind_id, spec in specs)
        entry: dict[str, Any] = {"description": text}
        if models:
            entry["model"] = models[0] if len(models) == 1 else Union[tuple(models)]  # noqa: UP007 (a runtime union)
        headers = {name: h for _, spec in specs for name, h in (spec.get("headers") or {}).items()}
        if headers:
            entry["headers"] = headers
        merged[int(status) if status.isdigit() else status] = entry
    return merged


def _models(model: Any) -> Sequence[type[BaseModel]]:
    if model is None:
        return ()
    args = getattr(model, "__args__", None)
    return tuple(args) if args else (model,)


def _parameters(inner: dict[str, APIRoute], titles: dict[str, str]) -> list[dict[str, Any]]:
    """The query parameters of every kind's handler, each once, saying which kinds read it."""
    found: dict[str, dict[str, str]] = {}
    for kind_id, route in inner.items():
        for name, description in _query_fields(route.dependant):
            found.setdefault(name, {})[titles[kind_id].split(':')[0]] = description
    return [{"name": name, "in": "query", "required": False, "schema": {}, "description": _said_by(kinds)}
            for name, kinds in found.items()]


def _said_by(kinds: dict[str, str]) -> str:
    """One parameter's words, each said once with the kinds that say it: "(one kind, another kind) …"."""
    by_text: dict[str, list[str]] = {}
    for kind, text in kinds.items():
        by_text.setdefault(text, []).append(kind)
    return " ".join(f"({', '.join(names)}) {text}".strip() for text, names in by_text.items())


def _query_fields(dependant: Any) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    for field in dependant.query_params:
        model = field.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            fields += [(info.alias or name, info.description or "") for name, info in model.model_fields.items()]
        else:
            fields.append((field.alias, field.field_info.description or ""))
    for sub in dependant.dependencies:
        fields += _query_fields(sub)
    return fields


def _redirect(moved: Moved) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    async def redirect(request: Request) -> Response:
        target = moved.new.format(**{k: quote(str(v), safe="") for k, v in request.path_params.items()})
        query = request.url.query
        return RedirectResponse(target + (f"?{query}" if query else ""), status_code=308)

    return redirect
