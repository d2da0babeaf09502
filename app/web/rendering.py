"""Templates, and full page or fragment decided in one place from the HX-Request header.

Templates get finished view objects; the only globals are pure formatters and
the static-file URL.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import HTMLResponse

from app.views import numbers
from app.views.urls import URLS
from app.web.settings import PROJECT_ROOT

templates = Jinja2Templates(directory=str(PROJECT_ROOT / "templates"))
templates.env.filters["num"] = numbers.readout
templates.env.filters["full"] = numbers.exact
templates.env.filters["ratio"] = numbers.ratio
templates.env.globals["urls"] = URLS  # a pure builder: the links templates write themselves


def add_template_dirs(dirs) -> None:
    """A kind's own templates (app/kinds/<kind>/templates/<kind>/…), searched after the shared ones.
    Called by create_app for the kinds it serves; additive (an app never takes a kind's templates
    from another app of the same process: their names start with the kind's id)."""
    loader = templates.env.loader
    for d in dirs:
        if str(d) not in loader.searchpath:  # type: ignore[union-attr]
            loader.searchpath.append(str(d))  # type: ignore[union-attr]


def add_static_dir(prefix: str, directory: Path) -> None:
    """A kind's own static files, served at /static/<prefix>/… (create_app mounts them): versioned
    like the shared ones. A prefix may not shadow a shared folder."""
    if (STATIC_DIR / prefix).exists():
        raise ValueError(f"static/{prefix} exists: a kind's static prefix may not shadow it")
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            name = f"{prefix}/{path.relative_to(directory).as_posix()}"
            _STATIC_ROOTS[name] = path
            _version(name)


# The request headers that choose between the full page and the fragment (wants_fragment), and which
# fragment: HX-Target names the part a kind's page route may answer alone (a figure's body).
VARY = "HX-Request, HX-History-Restore-Request, HX-Target"


def wants_fragment(request: Request) -> bool:
    # A history restore after a cache miss needs the whole page back.
    return (request.headers.get("HX-Request") == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def render(request: Request, page: str, fragment: str, context: dict, status_code: int = 200,
           headers: dict | None = None) -> HTMLResponse:
    name = fragment if wants_fragment(request) else page
    response = templates.TemplateResponse(request, name, context, status_code=status_code, headers=headers)
    # Same URL, two representations: caches must key on the headers that pick one.
    response.headers["Vary"] = VARY
    return response


def render_error(request: Request, status: int, title: str, message: str, entries=None) -> HTMLResponse:
    """The readable error page (404, 413, 503, 500…), for pages and fragments alike."""
    response = templates.TemplateResponse(request, "pages/error.html", {
        "status": status, "title": title, "message": message, "entries": entries}, status_code=status)
    response.headers["Vary"] = VARY
    # Never stored by a cache (the HTTP cache middleware may allow a 404 a short while); this
    # also covers the 500 page, which Starlette sends outside every middleware.
    response.headers["Cache-Control"] = "no-store"
    return response


def static_url(name: str) -> str:
    """A root-relative URL with a content hash: never built from the Host header
    (which a client controls), and a changed file gets a new URL. Served with a one-year
    `immutable` Cache-Control while `v` is the file's current hash (middleware/http_cache.py)."""
    return f"/static/{name}?v={_STATIC_VERSIONS.get(name) or _version(name)}"


def static_version(name: str) -> str | None:
    """The current content hash of static/<name> (a path as in the URL), None if no such file.
    A table lookup only: the name comes from a request and never reaches the filesystem."""
    return _STATIC_VERSIONS.get(name)


def _version(name: str) -> str:
    digest = hashlib.sha256(_STATIC_ROOTS.get(name, STATIC_DIR / name).read_bytes()).hexdigest()[:10]
    _STATIC_VERSIONS[name] = digest
    return digest


# Computed once at start: every file under static/ (about 2 MB; a few milliseconds).
STATIC_DIR = PROJECT_ROOT / "static"
_STATIC_VERSIONS: dict[str, str] = {}
_STATIC_ROOTS: dict[str, Path] = {}  # a kind's file: where it lies (add_static_dir)
for _path in sorted(STATIC_DIR.rglob("*")):
    if _path.is_file():
        _version(_path.relative_to(STATIC_DIR).as_posix())

templates.env.globals["static"] = static_url
