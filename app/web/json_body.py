"""JSON bodies built off the event loop: serialised, and compressed when the client takes gzip.

For large answers (a G = 4096 tensors body is ~1 MB) both steps cost tens of milliseconds;
done on the event loop they delay every other request, /healthz included. A route that runs
its work on the compute executor builds the finished Response there with `json_response`;
GZipMiddleware leaves a body that already has a Content-Encoding alone.
"""
from __future__ import annotations

import gzip

from fastapi import Request
from fastapi.responses import JSONResponse

GZIP_MIN_BYTES = 500   # GZipMiddleware's minimum_size in factory.py: the same answers compressed
GZIP_LEVEL = 6         # and at its level


def accepts_gzip(request: Request) -> bool:
    return "gzip" in request.headers.get("accept-encoding", "")


def json_response(content: object, gzip_ok: bool) -> JSONResponse:
    """Same JSON bytes as FastAPI's own; gzip with no timestamp (mtime=0), so a body is the
    same on every replica and its ETag too."""
    response = JSONResponse(content)
    if gzip_ok and len(response.body) >= GZIP_MIN_BYTES:
        response.body = gzip.compress(response.body, GZIP_LEVEL, mtime=0)
        response.headers["content-encoding"] = "gzip"
        response.headers["content-length"] = str(len(response.body))
    response.headers["vary"] = "Accept-Encoding"
    return response
