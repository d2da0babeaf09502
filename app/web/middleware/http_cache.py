"""HTTP caching headers: ETag, Cache-Control, Vary and 304s; and a relative trailing-slash redirect.

Every page, fragment and JSON body is a pure function of the URL and a few request headers,
and changes only with a deploy (code, templates, walkthrough files) or never (uploads are
content-addressed). So browsers and a CDN may keep them:

- deterministic GETs, 2xx and 3xx: `public, max-age=300, stale-while-revalidate=3600,
  stale-if-error=86400`. Five minutes bounds how long a deploy takes to reach everyone; past
  that a cache revalidates, in the background for an hour (a 304 costs no compute here), and
  serves its copy for a day while this server errs or is busy (503).
- /static/<file>?v=<the file's current hash> (rendering.static_url): `public,
  max-age=31536000, immutable`; without `v`, or with another file's or an older hash, five
  minutes, so an old page asking for an old hash never pins today's bytes for a year.
- 404 and 410: `public, max-age=30`, a short negative cache; `no-store` when the path names
  an upload id (an upload can appear at any moment). Every other 4xx and 5xx, every
  non-GET and /healthz: `no-store`.

The ETag of a 200 is a hash of the bytes sent (SHA-256, 128 bits, strong). Pages are
deterministic, so identical requests get identical ETags on every replica without any
version bookkeeping, and an upload or a new data file can never leave a stale ETag behind.
The hash is taken after compression, so a gzip body and an identity body get different
ETags, as RFC 9110 §8.8.3 wants of two representations (Starlette's gzip writes no
timestamp: the same body compresses to the same bytes). Hashing is cheap next to the
work: the response cache (inside this layer) replays the 200, this layer hashes it
(about 1 ms per MB) and answers 304.

Conditional headers are taken off the request before it goes down, so the response cache
replays a 200 for it and this layer alone decides: If-None-Match with the weak comparison,
lists and `*` (RFC 9110 §13.1.2). The 304 carries the 200's ETag, Cache-Control and Vary,
no body, no representation headers. Range requests pass through untouched (the static
files' own ETag then answers If-Range). HEAD is served as GET outside (head.py), so it
gets the same headers.

Pages (`/`, `/walkthroughs/...`) vary on HX-Request and HX-History-Restore-Request (a
fragment or the whole page), on every status; GZipMiddleware adds Accept-Encoding when it
compresses.
"""
from __future__ import annotations

import hashlib
import re
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.responses import RedirectResponse
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.domain.uploads import ID_PATTERN
from app.web.rendering import VARY, StaticVersions

PUBLIC = "public, max-age=300, stale-while-revalidate=3600, stale-if-error=86400"
IMMUTABLE = "public, max-age=31536000, immutable"
STATIC_SHORT = "public, max-age=300"
NOT_FOUND = "public, max-age=30"
NO_STORE = "no-store"
# What a route sends on an answer that may change any second (a run nobody started: a POST may start it
# now); kept on an error too, where any other Cache-Control of a route gives way to the policy.
CHANGES_NOW = "no-store, max-age=0"

CACHEABLE_PATHS = frozenset({"/", "/docs", "/openapi.json"})
CACHEABLE_PREFIXES = ("/walkthroughs/", "/api/walkthroughs", "/api/processes", "/static/")
CONDITIONS = (b"if-none-match", b"if-modified-since")
# A 304 describes the stored 200: headers of the body itself are left off (RFC 9110 §15.4.5).
NOT_FOR_304 = frozenset({"content-length", "content-type", "content-encoding", "last-modified",
                         "transfer-encoding"})
ENTITY_TAG = re.compile(r'(?:W/)?"[^"]*"')
UPLOAD_ID = re.compile(r"^/(?:api/)?walkthroughs/([^/]+)")


def is_cacheable(path: str) -> bool:
    return path in CACHEABLE_PATHS or path.startswith(CACHEABLE_PREFIXES)


def is_page(path: str) -> bool:
    return path == "/" or path.startswith("/walkthroughs/")


def names_upload(path: str) -> bool:
    m = UPLOAD_ID.match(path)
    return m is not None and ID_PATTERN.fullmatch(m.group(1)) is not None


def is_versioned_static(path: str, query_string: bytes, static: StaticVersions | None) -> bool:
    """/static/<name>?v=<name's current content hash, as the app versions it>: the URL names these exact bytes."""
    versions = parse_qs(query_string.decode("latin-1")).get("v")
    current = (static or StaticVersions()).version(path.removeprefix("/static/"))
    return current is not None and versions == [current]


def cache_control(method: str, path: str, query_string: bytes, status: int,
                  static: StaticVersions | None = None) -> str:
    if method != "GET":
        return NO_STORE
    if status in (404, 410):
        return NO_STORE if names_upload(path) else NOT_FOUND
    if status >= 400 or status < 200 or not is_cacheable(path):
        return NO_STORE
    if path.startswith("/static/"):
        return IMMUTABLE if status in (200, 206) and is_versioned_static(path, query_string, static) else STATIC_SHORT
    return PUBLIC


def none_match(if_none_match: str, etag: str) -> bool:
    """True when If-None-Match names this ETag (weak comparison) or is `*`."""
    field = if_none_match.strip()
    if field == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.removeprefix("W/") == opaque for tag in ENTITY_TAG.findall(field))


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def merge_vary(headers: MutableHeaders, names: str) -> None:
    values = [v.strip() for v in headers.get("vary", "").split(",") if v.strip()]
    seen = {v.lower() for v in values}
    values += [n.strip() for n in names.split(",") if n.strip().lower() not in seen]
    headers["vary"] = ", ".join(values)


class HttpCacheMiddleware:
    """Pure ASGI. Buffers the 200s of deterministic GETs (to hash them), up to `max_body`
    bytes; a longer body is streamed with only Cache-Control added."""

    def __init__(self, app: ASGIApp, max_body: int = 16 * 1024 * 1024, static: StaticVersions | None = None) -> None:
        self.app = app
        self.max_body = max_body
        self.static = static  # the app's static files (its AppContext's): the shared ones when None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        query_string = scope.get("query_string", b"")

        def stamp(message: Message) -> MutableHeaders:
            headers = MutableHeaders(raw=list(message.get("headers", [])))
            status = message["status"]
            # A route may choose its own Cache-Control for a success, and no-store for anything (a 404
            # for a run not computed yet must not be kept: a POST may start it a second later); other
            # errors follow the policy.
            own = headers.get("cache-control", "")
            if (status >= 400 and own != CHANGES_NOW) or not own:
                headers["cache-control"] = cache_control(method, path, query_string, status, self.static)
            if is_page(path):
                merge_vary(headers, VARY)
            message["headers"] = headers.raw
            return headers

        request_headers = scope["headers"]
        names = {name.lower() for name, _ in request_headers}
        if method != "GET" or not is_cacheable(path) or b"range" in names:
            async def send_stamped(message: Message) -> None:
                if message["type"] == "http.response.start":
                    stamp(message)
                await send(message)
            await self.app(scope, receive, send_stamped)
            return

        if_none_match = ", ".join(v.decode("latin-1") for n, v in request_headers if n.lower() == b"if-none-match")
        scope = {**scope, "headers": [(n, v) for n, v in request_headers if n.lower() not in CONDITIONS]}
        start: Message | None = None
        chunks: list[bytes] = []
        size = 0
        streaming = False

        async def capture(message: Message) -> None:
            nonlocal start, size, streaming
            kind = message["type"]
            if kind == "http.response.start":
                start = {**message}
                return
            if streaming:
                await send(message)
                return
            assert start is not None
            if kind != "http.response.body":  # pathsend, trailers: let it through as it is
                streaming = True
                stamp(start)
                await send(start)
                await send(message)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if more and size <= self.max_body:
                return
            if more:  # too long to hold: send what we have and stream the rest
                streaming = True
                stamp(start)
                await send(start)
                await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                return
            await self._finish(start, b"".join(chunks), stamp, if_none_match, send)

        await self.app(scope, receive, capture)

    @staticmethod
    async def _finish(start: Message, body: bytes, stamp, if_none_match: str, send: Send) -> None:
        headers = stamp(start)
        if start["status"] == 200 and "set-cookie" not in headers:
            etag = etag_of(body)
            headers["etag"] = etag
            if "last-modified" in headers:  # the static files' own validator: the ETag replaces it
                del headers["last-modified"]
            if if_none_match and none_match(if_none_match, etag):
                raw = [(n, v) for n, v in headers.raw if n.decode("latin-1").lower() not in NOT_FOR_304]
                await send({"type": "http.response.start", "status": 304, "headers": raw})
                await send({"type": "http.response.body", "body": b""})
                return
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body})


class RelativeSlashRedirect:
    """The router's `default`, for `redirect_slashes=False`: `/walkthroughs/new/` -> 307
    `/walkthroughs/new`, path and query only. Starlette's own redirect is absolute, built
    from the Host header a client sends. Nothing matched: the router's 404."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        target = path.rstrip("/")
        if scope["type"] == "http" and target != path and target.startswith("/") \
                and not target.startswith(("//", "/\\")):
            moved = {**scope, "path": target}
            if any(route.matches(moved)[0] is not Match.NONE for route in self.router.routes):
                query = scope.get("query_string", b"").decode("latin-1")
                location = target + ("?" + query if query else "")
                await RedirectResponse(location, status_code=307)(scope, receive, send)
                return
        await self.router.not_found(scope, receive, send)
