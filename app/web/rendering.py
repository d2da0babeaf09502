"""Templates, and full page or fragment decided in one place from the HX-Request header.

Templates get finished view objects; the only globals are pure formatters and
the static-file URL.
"""
from __future__ import annotations

import hashlib

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import HTMLResponse

from ..views import numbers
from ..views.urls import URLS
from .settings import PROJECT_ROOT

templates = Jinja2Templates(directory=str(PROJECT_ROOT / "templates"))
templates.env.filters["num"] = numbers.readout
templates.env.filters["full"] = numbers.exact
templates.env.globals["urls"] = URLS  # a pure builder: the links templates write themselves


def wants_fragment(request: Request) -> bool:
    # A history restore after a cache miss needs the whole page back.
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def render(request: Request, page: str, fragment: str, context: dict, status_code: int = 200,
           headers: dict | None = None) -> HTMLResponse:
    name = fragment if wants_fragment(request) else page
    response = templates.TemplateResponse(request, name, context, status_code=status_code, headers=headers)
    # Same URL, two representations: caches must key on the header.
    response.headers["Vary"] = "HX-Request"
    return response


def render_error(request: Request, status: int, title: str, message: str, entries=None) -> HTMLResponse:
    """The readable error page (404, 413, 503, 500…), for pages and fragments alike."""
    response = templates.TemplateResponse(request, "pages/error.html", {
        "status": status, "title": title, "message": message, "entries": entries}, status_code=status)
    response.headers["Vary"] = "HX-Request"
    return response


def static_url(name: str) -> str:
    """A root-relative URL with a content hash: never built from the Host header
    (which a client controls), and a changed file gets a new URL."""
    return f"/static/{name}?v={_STATIC_VERSIONS.get(name) or _version(name)}"


_STATIC_VERSIONS: dict[str, str] = {}


def _version(name: str) -> str:
    digest = hashlib.sha256((PROJECT_ROOT / "static" / name).read_bytes()).hexdigest()[:10]
    _STATIC_VERSIONS[name] = digest
    return digest


templates.env.globals["static"] = static_url
