"""A followed run's status in its explorer (issue 50; `python -m app open RUN_DIR --follow`).

While the follower's heartbeat is fresh (domain/run_follow.py: DATA_DIR/runs/follow/<id>.json, STALE_S), the explorer
says "Following: last update Ns ago, N steps" and polls `GET /runs/{id}/follow?v=VERSION` every 2 s (htmx). The answer
is that status line alone (a few hundred bytes, one small file read); when the run's version is not the page's, it
carries `HX-Trigger: run-grew`, and the page's listener fetches the explorer again and swaps `#run-explorer` in place
(no reload: the URL, scroll and zoom stay). Once the follower stops, the line says so and polls no more. Without
script, a `<noscript>` meta refresh reloads the page every 5 s while following.

The explorer of a run opened from a folder still on the server's disk, and not followed now, offers "Follow this
folder as it grows": `POST /runs/{id}/follow` (a plain form) has the server follow it (web/run_follow_server.py) and
answers 303 to `/runs/<follow id>`; a follower the server started is stopped by `POST /runs/{follow id}/unfollow`.
Both refuse a request another site sent (Origin or Sec-Fetch-Site naming another site: 403).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from app.runs.domain.run_follow import FollowedRunStore, follow_id
from app.runs.examples import RUN_DIR
from app.runs.views import urls
from app.runs.web.run_follow_server import FollowRefused, ServerFollows
from app.views.urls import with_query
from app.web.errors import NotFound
from app.web.lifespan import with_server
from app.web.rendering import render, render_error

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
        "unfollow_url": f"{urls.run(run_id)}/unfollow" if (f := _follows(request)) and f.owns(run_id) else None,
    }


def _follows(request: Request) -> ServerFollows | None:
    return getattr(request.app.state, "run_follows", None)


def follow_offer(request: Request, run_id: str, follow: dict[str, Any] | None,
                 now: float | None = None) -> dict[str, Any] | None:
    """The explorer's "Follow this folder as it grows" (a run opened from a folder still on this disk, not followed
    now), or where the folder is followed already; None where there is nothing to follow."""
    follows = _follows(request)
    if follows is None or (follow is not None and follow["following"]):
        return None
    folder = follows.folder(run_id)
    if folder is None:
        return None
    ident = follow_id(folder)
    state = request.app.state.run_store.follows.read(ident)
    now = time.time() if now is None else now
    if ident != run_id and state is not None and state.following(now):
        return {"folder": folder.name, "followed_url": urls.run(ident)}
    return {"folder": folder.name, "action": f"{urls.run(run_id)}/follow"}


def _server(request: Request) -> ServerFollows:
    follows = _follows(request)
    if follows is None:
        raise NotFound("this app follows no folder")
    return follows


def _cross_site(request: Request) -> Response | None:
    """A form another site posted (a browser says so: Sec-Fetch-Site, Origin): refused."""
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if request.headers.get("sec-fetch-site") == "cross-site" or (
            origin is not None and origin != "null" and urlsplit(origin).netloc != host):
        return render_error(request, 403, "Refused", "a form of another site cannot follow a folder here")
    return None


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


@router.post("/runs/{run_id}/follow")
async def follow_folder(request: Request, run_id: str) -> Response:
    """Follow the folder the run was opened from (the store's record, never the request's), then its explorer."""
    if (refused := _cross_site(request)) is not None:
        return refused
    try:
        ident = await run_in_threadpool(_server(request).follow, run_id)
    except FollowRefused as exc:
        return render_error(request, exc.status, exc.title, exc.message)
    return RedirectResponse(urls.run(ident), status_code=303)


@router.post("/runs/{run_id}/unfollow")
async def unfollow_folder(request: Request, run_id: str) -> Response:
    """Stop a follower this server started; its explorer then says following ended."""
    if (refused := _cross_site(request)) is not None:
        return refused
    if not await run_in_threadpool(_server(request).unfollow, run_id):
        state = request.app.state.run_store.follows.read(run_id)
        if state is None:
            return render_error(request, 404, "Not followed", f"no followed run {run_id!r} here")
        return render_error(request, 409, "Not followed by this server",
                            f"run {run_id} is not followed by this server: a follower started by `python -m app "
                            "open RUN_DIR --follow` stops with Ctrl-C where it runs")
    return RedirectResponse(urls.run(run_id), status_code=303)


def install(app: FastAPI) -> None:
    settings = app.state.settings
    follows = ServerFollows(app.state.run_store, app.state.catalog.uploads,
                            never=(settings.resolved_data_dir, RUN_DIR))
    app.state.run_follows = follows
    with_server(app, lambda: None, follows.stop_all)  # every follower the server started stops with it


__all__ = ["follow_context", "follow_offer", "install"]
