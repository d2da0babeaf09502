"""Full page or fragment, decided in one place from the HX-Request header."""
from __future__ import annotations

import hashlib

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import HTMLResponse

from .. import charts, process_charts
from ..settings import PROJECT_ROOT

templates = Jinja2Templates(directory=str(PROJECT_ROOT / "templates"))


def format_number(value) -> str:
    """Four significant digits for reading; the exact value rides along in data-value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0"
    text = f"{value:.4g}"
    return text.replace("-", "−")


def full_number(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


templates.env.filters["num"] = format_number
templates.env.filters["full"] = full_number
templates.env.globals["charts"] = charts
templates.env.globals["process_charts"] = process_charts


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
