"""A followed run's status in its explorer (issue 50; `python -m app open RUN_DIR --follow`).

While the follower's heartbeat is fresh (domain/run_follow.py: DATA_DIR/runs/follow/<id>.json, STALE_S), the explorer
says "Following: last update Ns ago, N steps" and polls `GET /runs/{id}/follow?v=VERSION` every 2 s (htmx). The answer
is that status line alone (a few hundred bytes, one small file read); when the run's version is not the page's, it
carries `HX-Trigger: run-grew`, and the page's listener fetches the explorer again and swaps `#run-explorer` in place
(no reload: the URL, scroll and zoom stay). Once the follower stops, the line says so and polls no more. Without
script, a `<noscript>` meta refresh reloads the page every 5 s while following.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.runs.domain.run_follow import FollowedRunStore
from app.runs.views import urls
from app.views.urls import with_query
from app.web.errors import NotFound
from app.web.rendering import render

STATUS = "run_explorer/run_follow_status.html"
POLL_S = 2
NO_SCRIPT_REFRESH_S = 5

router = APIRouter(include_in_schema=False)


def _ago(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


def follow_context(request: Request, run_id: str, now: float | None = None) -> dict[str, Any] | None:
    """What the explorer says of a followed run; None for a run no follower ever followed."""
    store = request.app.state.run_store
    if not isinstance(store, FollowedRunStore):
        return None
    state = store.follows.read(run_id)
    if state is None:
        return None
    now = time.time() if now is None else now
    query = {k: v for k, v in request.query_params.items() if k != "v"}
    return {
        "id": run_id, "folder": Path(state.folder).name, "following": state.following(now), "version": state.version,
        "steps": state.steps, "last_step": state.last_step, "findings": len(state.findings),
        "ago": _ago(now - state.updated) if state.updated else None,
        "poll_url": with_query(f"{urls.run(run_id)}/follow", {"v": str(state.version)}),
        "page_url": urls.run(run_id, query), "poll_s": POLL_S, "refresh_s": NO_SCRIPT_REFRESH_S,
    }


@router.get("/runs/{run_id}/follow")
async def follow_status(request: Request, run_id: str, v: str = "") -> Response:
    """The status line alone; `HX-Trigger: run-grew` when the run's version is not `v` (the page's)."""
    follow = await run_in_threadpool(follow_context, request, run_id)
    if follow is None:
        raise NotFound(f"no followed run {run_id!r} here (`python -m app open RUN_DIR --follow` follows one)")
    headers = {"Cache-Control": "no-store"}
    if v != str(follow["version"]):
        headers["HX-Trigger"] = "run-grew"
    return render(request, STATUS, STATUS, {"follow": follow}, headers=headers)


def install(app: FastAPI) -> None:
    app.include_router(router)


__all__ = ["follow_context", "install"]
