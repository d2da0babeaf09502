"""Runs compared (issue 50). Thin: the run store holds the runs, their recorded steps (uploads) carry their configs,
the view model (views/run_compare.py) builds the page.

- `GET /runs/compare?run=ID&run=ID…` (2 to 8 stored runs; `x=tokens` for TRL's tokens seen on the x axis): the
  page. Fewer or more runs, an unknown id, one given twice, an axis it does not know, any other parameter: a 422
  page naming the field, with the stored runs to pick from.
- `GET /api/runs/compare?run=…`: its JSON twin, 422 bodies naming the field.
- The explorer's "Compare with…" form (templates/runs/run_compare_link.html) lists the other stored runs:
  `run_compare_choices(request, run_id)`, a template global.

Registered before the explorer's routes: `/runs/compare` would otherwise be read as a run whose id is "compare".
"""
from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.kinds.step_record.domain.record import StepRecord
from app.runs.domain.run_config import RunConfig, from_kept, from_record, from_state, merged
from app.runs.domain.run_log import RunLog
from app.runs.domain.run_store import RUN_ID, RunStore
from app.runs.views.run_compare import RunCompare, compare
from app.runs.views.run_compare_json import compare_body
from app.runs.views.run_compare_query import MAX_RUNS, CompareQuery, read_compare
from app.runs.views.run_view import BadRunQuery
from app.web.deps import CatalogDep, StrictQueryRoute
from app.web.rendering import render, render_error
from app.web.schemas.errors import ValidationErrorBody, error

PAGE = "run_explorer/run_compare.html"

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)


def install(app: FastAPI) -> None:
    """The run store is read per request; its routes come before the explorer's (its `/runs/{id}` would take
    `/runs/compare`: the manifest's ROUTERS)."""
    app.state.context.templates.env.globals["run_compare_choices"] = compare_choices


def _store(request: Request) -> RunStore:
    return request.app.state.run_store


@dataclass(frozen=True)
class StoredRun:
    id: str
    stored: str  # "2026-12-06 16:20 UTC"


def stored_runs(store: RunStore) -> list[StoredRun]:
    """Every stored run's id and when it was stored, newest first (no log is read)."""
    found: dict[str, float] = {}
    if store.root.is_dir():
        for p in store.root.glob("*.json"):
            if RUN_ID.match(p.stem):
                try:
                    found[p.stem] = p.stat().st_mtime
                except FileNotFoundError:
                    continue
    if store.refs is not None:
        found |= {row.id: row.created for row in store.refs.run_listing()}
    return [StoredRun(i, datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC"))
            for i, t in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))]


@dataclass(frozen=True)
class CompareChoices:
    action: str
    run_id: str
    others: tuple[StoredRun, ...]
    most: int = MAX_RUNS - 1


def compare_choices(request: Request, run_id: str) -> CompareChoices:
    """The explorer's "Compare with…" form: the other stored runs to tick."""
    others = tuple(r for r in stored_runs(_store(request)) if r.id != run_id)
    return CompareChoices("/runs/compare", run_id, others)


_STATES: OrderedDict[str, dict[str, Any]] = OrderedDict()  # run id -> trainer_state.json's top level (no log)
_STATES_LOCK = threading.Lock()


def _state_fields(store: RunStore, ident: str) -> dict[str, Any]:
    """trainer_state.json's fields beside log_history; a run's bytes never change under its id (their sha256)."""
    key = f"{store.root}:{ident}"
    with _STATES_LOCK:
        if key in _STATES:
            return _STATES[key]
    try:
        document = json.loads(store.path(ident).read_bytes())
    except (OSError, ValueError, KeyError):
        return {}
    fields = {k: v for k, v in document.items() if k != "log_history"} if isinstance(document, dict) else {}
    with _STATES_LOCK:
        _STATES[key] = fields
        while len(_STATES) > 64:
            _STATES.popitem(last=False)
    return fields


def run_config(store: RunStore, cat, ident: str) -> RunConfig:
    """The run's config: its first recorded step's record (the trainer's own config), then its training_args.bin's
    fields as kept when its folder was opened, then trainer_state.json's."""
    parts = []
    for step, walkthrough in sorted(store.recorded(ident).items()):
        try:
            entry = cat.get(walkthrough)
        except KeyError:
            continue
        if isinstance(entry.payload, StepRecord):
            r = entry.payload
            parts.append(from_record(step, r.run.framework, r.run.framework_version, r.run.model, r.framework_config,
                                     r.config.model_dump()))
            break
    parts.append(from_kept(store.config(ident)))
    parts.append(from_state(_state_fields(store, ident)))
    return merged(*parts)


def _read(request: Request, cat) -> tuple[CompareQuery, list[tuple[str, RunLog]], list[RunConfig]]:
    store = _store(request)
    stored = [r.id for r in stored_runs(store)]
    logs: dict[str, RunLog] = {}

    def known(ident: str) -> bool:
        log = store.get(ident) if RUN_ID.match(ident) else None
        if log is not None:
            logs[ident] = log
        return log is not None

    q = read_compare(request.query_params.multi_items(), stored, known)
    runs = [(i, logs[i]) for i in q.ids]
    return q, runs, [run_config(store, cat, i) for i in q.ids]


# The last few compare views (issue 50: 4 runs of 10,000 steps compared warm in <= 400 ms; drawing their ~70,000
# points as SVG is most of a request). A view is a function of the runs' logs, the query and their configs: the key
# holds the ids, the query and the configs as written (repr: RunConfig holds dicts), and the entry weak references
# to the logs it was drawn from, so a log read again (a new object: a followed run's next version, derived numbers
# joined) is a miss, and a kept view never keeps a log alive after the run store let it go.
_VIEWS: OrderedDict[tuple, tuple[tuple[weakref.ref[RunLog], ...], RunCompare]] = OrderedDict()
_VIEWS_LOCK = threading.Lock()
VIEWS = 4


def _build(request: Request, cat) -> RunCompare:
    q, runs, configs = _read(request, cat)
    key = (q, repr(configs))
    with _VIEWS_LOCK:
        kept = _VIEWS.get(key)
        if kept is not None and len(kept[0]) == len(runs) and all(
                ref() is log for ref, (_, log) in zip(kept[0], runs, strict=True)):
            _VIEWS.move_to_end(key)
            return kept[1]
    view = compare(runs, configs, q)
    with _VIEWS_LOCK:
        _VIEWS[key] = (tuple(weakref.ref(log) for _, log in runs), view)
        _VIEWS.move_to_end(key)
        while len(_VIEWS) > VIEWS:
            _VIEWS.popitem(last=False)
    return view


@pages.get("/runs/compare")
async def compare_page(request: Request, cat: CatalogDep) -> Response:
    try:
        view = await run_in_threadpool(_build, request, cat)
    except BadRunQuery as exc:
        return render_error(request, 422, "These runs cannot be compared", str(exc))
    return render(request, PAGE, PAGE, {"cmp": view})


@api.get("/runs/compare", responses={
    422: error("`run` given fewer than 2 or more than 8 times, an id no stored run has, a run given twice, `x` not "
               "step or tokens (or tokens where no run logged num_tokens), or an unknown parameter.",
               ValidationErrorBody)})
async def compare_json(request: Request, cat: CatalogDep,
                       run: Annotated[list[str] | None, Query(description="A stored run's id, 2 to 8 times.")] = None,
                       x: Annotated[str | None, Query(description="`step` (default) or `tokens` (TRL's "
                                                                  "num_tokens).")] = None) -> JSONResponse:
    """Stored runs compared: each run's config and where it came from, the keys whose values differ (the rest counted
    as equal or known for only some runs), every metric they share as (x, value) points per run (cut by M4 to at
    most 4 × 150 a run; "nan"/"inf" as strings), the metrics only some runs logged, and each run's findings."""
    def build() -> dict:
        q, runs, configs = _read(request, cat)
        return compare_body(q, runs, configs, compare(runs, configs, q))

    try:
        body = await run_in_threadpool(build)
    except BadRunQuery as exc:
        return JSONResponse({"error": str(exc), "detail": [{"param": exc.param, "message": str(exc),
                                                            "allowed": None}]}, status_code=422)
    return JSONResponse(body)


__all__ = ["CompareChoices", "StoredRun", "compare_choices", "install", "run_config", "stored_runs"]
