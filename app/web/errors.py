"""Error responses: clear JSON messages, never a stack trace sent to the client."""
from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.domain.uploads import UploadRejected
from app.engine.runtime.compute import ComputeBusy
from app.web.middleware.security import security_headers
from app.web.rendering import render_error

log = logging.getLogger("app.errors")


class NotFound(LookupError):
    """An unknown walkthrough, step or node: 404 with a message a person can read."""


class NotRunnable(LookupError):
    """A view-only snapshot asked for tensors: 409, it has no matching model."""


def _no_range(_name: str) -> str | None:
    return None


def validation_details(errors, allowed_range: Callable[[str], str | None] = _no_range) -> list[dict]:
    """pydantic errors -> [{param, message, allowed}] naming each query parameter."""
    details = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("query", "path", "body")]
        param = loc[0] if loc else "request"
        message = err.get("msg", "invalid").removeprefix("Value error, ")
        # an unknown parameter has no range, even one named like another route's parameter
        # side B of /compare (vs_beta) has side A's ranges
        if "allowed" in err:  # the route's own model named it (a kind's parameters)
            allowed = err["allowed"]
        else:
            allowed = None if err.get("type") == "extra_forbidden" else allowed_range(param.removeprefix("vs_"))
        details.append({"param": param, "message": message, "allowed": allowed})
    return details


def validation_message(details: list[dict]) -> str:
    return "; ".join(f"{d['param']}: {d['message']}" + (f" (allowed: {d['allowed']})" if d["allowed"] else "")
                     for d in details)


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api") or request.url.path in ("/healthz", "/openapi.json")


def install_error_handlers(app: FastAPI, allowed_range: Callable[[str], str | None] = _no_range) -> None:
    """`allowed_range` names the range of a parameter a 422 did not (the kinds', app/web/kinds.py)."""
    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError):
        details = validation_details(exc.errors(), allowed_range)
        return JSONResponse({"error": validation_message(details), "detail": details}, status_code=422)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound):
        if not _is_api(request):
            return render_error(request, 404, "Not found", str(exc))
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(NotRunnable)
    async def _not_runnable(_request: Request, exc: NotRunnable):
        return JSONResponse({"error": str(exc)}, status_code=409)

    @app.exception_handler(UploadRejected)
    async def _rejected(request: Request, exc: UploadRejected):
        if not _is_api(request):
            return render_error(request, exc.status, "Upload refused", str(exc))
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(ComputeBusy)
    async def _busy(request: Request, exc: ComputeBusy):
        # Queued work is bounded: past the bound, say so at once instead of piling up.
        headers = {"Retry-After": "1"}
        if not _is_api(request):
            response = render_error(request, 503, "Busy", f"The server is busy computing: {exc}.")
            response.headers.update(headers)
            return response
        return JSONResponse({"error": f"busy: {exc}"}, status_code=503, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if not _is_api(request) and not request.url.path.startswith("/static"):
            message = "There is no page at this address." if exc.status_code == 404 else str(exc.detail)
            return render_error(request, exc.status_code, "Not found" if exc.status_code == 404 else "Error", message)
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        # Starlette answers these outside all middleware, so the headers are added here.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        if not _is_api(request):
            response = render_error(request, 500, "Something went wrong",
                                   "The server could not build this page; the error has been logged.")
        else:
            response = JSONResponse({"error": "internal error; it has been logged"}, status_code=500)
        response.headers.update(security_headers())
        response.headers["Cache-Control"] = "no-store"   # never cache a crash (HTML 500 has it already)
        return response
