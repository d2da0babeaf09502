"""A whole run opened from the browser (issue 34): the run directory as one archive, streamed in.

- `POST /api/runs`: the archive (.zip, .tar, .tar.gz) as the request body, raw or as a form's `archive` part;
  201 (200 when already stored) with the run's id, explorer URL, recorded steps and the files left out.
- `POST /runs/new`: the upload page's form (no script needed); 303 to the explorer, or the upload page with the
  refusal at its top, naming the archive, and the form right under it (views/run_refusal.py).

The body goes to a file under DATA_DIR/tmp/run-uploads (web/run_upload_body.py), is unpacked there with every
member checked (domain/run_archive.py), and the folder is opened as `python -m app open` opens one
(engine/run_opening.py, in the thread pool). The folder is removed whatever happens: stored, refused, or the client
gone mid-way. Past RUN_UPLOAD_MAX_MB the transport's cap answers 413 (middleware/limits.py) before the rest is
read. A refusal names the member by its path inside the archive, never the server's folder.
"""
from __future__ import annotations

import errno
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.responses import RedirectResponse, Response

from app.runs.domain.run_archive import MB, ArchiveLimits, ArchiveRefused, Unpacked, unpack
from app.runs.domain.run_dir import NoRunLog, find_trainer_state
from app.runs.domain.run_index import ReadIndex
from app.runs.domain.run_log import RunLogError
from app.runs.domain.run_store import RunRefused
from app.runs.engine.run_opening import OpenedRun, open_run_dir
from app.runs.views import urls
from app.runs.views.run_refusal import TEMPLATE, run_refusal
from app.runs.web.run_upload_body import FIELD, Received, receive_archive
from app.runs.web.run_upload_schemas import RunRefusalBody, RunUploadBody
from app.stores.uploads import StoreUnavailable
from app.views.urls import URLS
from app.web.deps import CatalogDep, StrictQueryRoute
from app.web.middleware.limits import MULTIPART_OVERHEAD, allow_body
from app.web.rendering import render
from app.web.routes.pages import upload_response
from app.web.schemas.errors import ErrorBody, ValidationErrorBody, error

API_PATH, PAGE_PATH = "/api/runs", "/runs/new"
OPENED = "run_explorer/run_opened.html"  # the form's answer when some files were left out
STALE_S = 24 * 3600  # a folder left by a server killed mid-upload is removed at the next start after this long
WHAT = ("a run directory archived: TRL's output_dir (trainer_state.json, step-records/, completions/), prime-rl's "
        "token_exports/, slime's train_data/ (either layout) and rollout_data/, or verl's rollout_data_dir")

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)


@dataclass(frozen=True)
class UploadConfig:
    temp_root: Path  # DATA_DIR/tmp/run-uploads: one folder per upload in flight
    limits: ArchiveLimits


def install(app: FastAPI) -> None:
    settings = app.state.settings
    temp_root = settings.resolved_data_dir / "tmp" / "run-uploads"
    _remove_stale(temp_root)
    app.state.run_upload = UploadConfig(temp_root, ArchiveLimits(settings.run_upload_max_mb * MB))
    message = (f"the archive is larger than this server's {settings.run_upload_max_mb:,} MB for a run "
               "(RUN_UPLOAD_MAX_MB): archive the run's logs and dumps without its checkpoints' weights")
    for path in (API_PATH, PAGE_PATH):
        allow_body(app, "POST", path, settings.run_upload_max_mb * MB + MULTIPART_OVERHEAD, message)
    # what run-upload.js fills in (run_upload_form.html)
    app.state.context.templates.env.globals["run_refusal_template"] = TEMPLATE


def _remove_stale(temp_root: Path) -> None:
    if not temp_root.is_dir():
        return
    for folder in temp_root.iterdir():
        try:
            if time.time() - folder.stat().st_mtime > STALE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # another process's, removed meanwhile


@dataclass(frozen=True)
class Stored:
    opened: OpenedRun
    refused: list[tuple[str, str]]  # (path inside the archive, why)


class _Scrub:
    """Paths under the unpacked folder as the archive's own paths: the server's folders never leave it."""

    def __init__(self, folder: Path) -> None:
        self.prefixes = sorted({str(folder), str(folder.resolve())}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for prefix in self.prefixes:
            text = text.replace(prefix + "/", "").replace(prefix, "the archive")
        return text


def _state_member(unpacked: Unpacked, source: str) -> str:
    """The refused trainer_state.json's path inside the archive (the reader may name it by its file name only)."""
    try:
        return unpacked.prefix + find_trainer_state(unpacked.root).relative_to(unpacked.root).as_posix()
    except (NoRunLog, ValueError):
        return _Scrub(unpacked.root.parent if unpacked.prefix else unpacked.root)(source)


def _open(archive: Path, work: Path, limits: ArchiveLimits, runs, uploads) -> Stored:
    """In the thread pool: unpack, then open the folder as `python -m app open` does."""
    files = work / "files"
    unpacked = unpack(archive, files, limits)
    archive.unlink()  # its room back before the run is read
    scrub = _Scrub(files)
    try:
        # a throwaway index: the folder is gone after this request, its entries would never be read again
        opened = open_run_dir(unpacked.root, runs, uploads, index=ReadIndex(work / "index"))
    except RunLogError as exc:
        raise ArchiveRefused(_state_member(unpacked, exc.source), exc.message, 422, field=exc.path or "$") from None
    except RunRefused as exc:
        raise ArchiveRefused(None, scrub(str(exc)), exc.status) from None
    except NoRunLog as exc:  # it says what was looked for, and where
        raise ArchiveRefused(None, scrub(str(exc)), 422) from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ArchiveRefused(None, "the server's disk is full: nothing was opened", 507) from None
        raise ArchiveRefused(None, f"cannot be read: {scrub(str(exc))}", 422) from None
    return Stored(opened, [(scrub(path), scrub(why)) for path, why in opened.refused])


async def _receive_and_open(request: Request, cat, received: Received | None = None) -> Stored:
    config: UploadConfig = request.app.state.run_upload
    config.temp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=config.temp_root, prefix="run-"))
    try:
        try:
            await receive_archive(request, work / "archive", received)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise ArchiveRefused(None, "the server's disk is full: the archive could not be received", 507) \
                    from None
            raise
        return await run_in_threadpool(_open, work / "archive", work, config.limits,
                                       request.app.state.run_store, cat.uploads)
    finally:
        await run_in_threadpool(shutil.rmtree, work, True)


def _payload(stored: Stored) -> dict:
    opened = stored.opened
    return {"id": opened.id, "url": urls.run(opened.id), "created": opened.created,
            "recorded": [{"step": step, "walkthrough": wid, "url": URLS.walkthrough(wid)}
                         for step, wid in sorted(opened.recorded.items())],
            "refused": [{"path": path, "why": why} for path, why in stored.refused]}


def _refusal(exc: ArchiveRefused) -> dict:
    return {"error": str(exc), **({"member": exc.member} if exc.member else {}),
            **({"field": exc.field} if exc.field else {})}


@api.post("/runs", status_code=201, openapi_extra={"requestBody": {
    "required": True, "description": f"The archive ({WHAT}): its bytes as the body, or the `{FIELD}` part of a "
                                     "multipart form. Its format is told by its first bytes, not its name.",
    "content": {**{t: {"schema": {"type": "string", "format": "binary"}} for t in (
        "application/zip", "application/x-tar", "application/gzip", "application/octet-stream")},
        "multipart/form-data": {"schema": {"type": "object", "required": [FIELD], "properties": {
            FIELD: {"type": "string", "format": "binary"}}}}}}}, responses={
    201: {"model": RunUploadBody, "description": "Stored"},
    200: {"model": RunUploadBody, "description": "Already stored (the same trainer_state.json bytes)"},
    400: error("Not a zip or tar (by its first bytes), cut short or damaged, or a member refused: an absolute "
               "path, `..`, a link or device, a name twice, too many members; `member` names it.", RunRefusalBody),
    413: error("Past RUN_UPLOAD_MAX_MB as sent (answered before the rest is read) or as unpacked (counted as it "
               "is written; `member` names where it passed), or a trainer_state.json past 64 MB.", RunRefusalBody),
    422: error("The run refused: no trainer_state.json and no per-token or per-sample file, or a trainer_state.json "
               "refused (`member` its path, `field` the JSON path), or a form without its `archive` part.",
               RunRefusalBody | ValidationErrorBody),
    503: error("The upload store cannot be reached just now; try again.", ErrorBody),
    507: error("The run store (UPLOAD_QUOTA_MB) or the server's disk is full: nothing was stored.", RunRefusalBody)})
async def upload_run_api(request: Request, cat: CatalogDep) -> Response:
    """Open a whole run from one archive of its directory, as `python -m app open RUN_DIR` opens the directory:
    its trainer_state.json (or the newest checkpoint's), its step records, linked to their steps, and the
    frameworks' per-token and per-sample files read into per-step metrics."""
    try:
        stored = await _receive_and_open(request, cat)
    except ArchiveRefused as exc:
        return JSONResponse(_refusal(exc), status_code=exc.status)
    except StoreUnavailable as exc:
        return JSONResponse({"error": f"the upload store cannot be reached: {exc}"}, status_code=503)
    except ClientDisconnect:
        return Response(status_code=400)  # the client left mid-upload: nobody reads this
    return JSONResponse(_payload(stored), status_code=201 if stored.opened.created else 200)


@pages.post(PAGE_PATH)
async def upload_run_page(request: Request, cat: CatalogDep) -> Response:
    """The upload page's "Open a whole run" form without script: a multipart form, then the explorer (or, when
    some files were left out, a page that names them and links the explorer); refused, the upload page with the
    refusal at its top, naming the archive, the form right under it."""
    received = Received()
    try:
        stored = await _receive_and_open(request, cat, received)
    except ArchiveRefused as exc:
        return upload_response(request, run_refusal(received.filename, str(exc), exc.status))
    except StoreUnavailable as exc:
        return upload_response(request, run_refusal(
            received.filename, f"the upload store cannot be reached just now ({exc}); try again", 503))
    except ClientDisconnect:
        return Response(status_code=400)  # the client left mid-upload: nobody reads this
    if stored.refused:  # stored, but not whole: say which files were left out before the explorer, which cannot
        return render(request, OPENED, OPENED, {"refused": stored.refused, "url": urls.run(stored.opened.id),
                                                "recorded": len(stored.opened.recorded)},
                      status_code=201 if stored.opened.created else 200)
    return RedirectResponse(urls.run(stored.opened.id), status_code=303)


__all__ = ["API_PATH", "PAGE_PATH", "install"]
