"""Templates, and full page or fragment decided in one place from the HX-Request header.

Templates get finished view objects; the only globals are pure formatters and
the static-file URL.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import HTMLResponse

from app.views import numbers
from app.views.urls import URLS
from app.web.settings import PROJECT_ROOT


def make_templates(dirs, static: StaticVersions | None = None) -> Jinja2Templates:
    """One app's templates (its AppContext's, app/web/context.py): the shared ones, then each of its
    kinds' own (app/kinds/<kind>/templates/<kind>/…), with the pure formatters and `static`, the URL of
    a static file as this app versions it (`static`: the shared files only when None)."""
    templates = Jinja2Templates(directory=[str(PROJECT_ROOT / "templates"), *(str(d) for d in dirs)])
    templates.env.filters["num"] = numbers.readout
    templates.env.filters["full"] = numbers.exact
    templates.env.filters["ratio"] = numbers.ratio
    templates.env.globals["urls"] = URLS  # a pure builder: the links templates write themselves
    templates.env.globals["static"] = (static or StaticVersions()).url
    return templates


def templates_of(request: Request) -> Jinja2Templates:
    """The templates of the request's app (its AppContext's)."""
    return request.app.state.context.templates


class StaticVersions:
    """One app's static files and their content hashes: the shared static/ folder's, and its kinds'
    (add_dir), served at /static/<kind id>/… (create_app mounts them)."""

    def __init__(self) -> None:
        self._versions: dict[str, str] = dict(_shared_versions())
        self._roots: dict[str, Path] = {}  # a kind's file: where it lies

    def add_dir(self, prefix: str, directory: Path) -> None:
        """A kind's own static files, versioned like the shared ones. A prefix may not shadow a shared folder."""
        if (STATIC_DIR / prefix).exists():
            raise ValueError(f"static/{prefix} exists: a kind's static prefix may not shadow it")
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                name = f"{prefix}/{path.relative_to(directory).as_posix()}"
                self._roots[name] = path
                self._versions[name] = _digest(path)

    def url(self, name: str) -> str:
        """A root-relative URL with a content hash: never built from the Host header
        (which a client controls), and a changed file gets a new URL. Served with a one-year
        `immutable` Cache-Control while `v` is the file's current hash (middleware/http_cache.py)."""
        version = self._versions.get(name)
        if version is None:
            version = self._versions[name] = _digest(self._roots.get(name, STATIC_DIR / name))
        return f"/static/{name}?v={version}"

    def version(self, name: str) -> str | None:
        """The current content hash of the static file <name> (a path as in the URL), None if no such
        file. A table lookup only: the name comes from a request and never reaches the filesystem."""
        return self._versions.get(name)


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
    response = templates_of(request).TemplateResponse(request, name, context, status_code=status_code, headers=headers)
    # Same URL, two representations: caches must key on the headers that pick one.
    response.headers["Vary"] = VARY
    return response


def render_error(request: Request, status: int, title: str, message: str, entries=None) -> HTMLResponse:
    """The readable error page (404, 413, 503, 500…), for pages and fragments alike."""
    response = templates_of(request).TemplateResponse(request, "pages/error.html", {
        "status": status, "title": title, "message": message, "entries": entries}, status_code=status)
    response.headers["Vary"] = VARY
    # Never stored by a cache (the HTTP cache middleware may allow a 404 a short while); this
    # also covers the 500 page, which Starlette sends outside every middleware.
    response.headers["Cache-Control"] = "no-store"
    return response


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


STATIC_DIR = PROJECT_ROOT / "static"


@functools.cache
def _shared_versions() -> dict[str, str]:
    """Every file under static/ and its hash (about 2 MB; a few milliseconds), once per process: a memo
    of the deployed files, which change only with a deploy (a new process); each app copies it."""
    return {path.relative_to(STATIC_DIR).as_posix(): _digest(path)
            for path in sorted(STATIC_DIR.rglob("*")) if path.is_file()}
