"""Whole-response cache for deterministic GETs.

Every page, fragment and JSON body here is a pure function of the URL and a
few request headers (the server keeps no state), so a 200 can be replayed
byte for byte. This removes routing, validation, rendering and compression
from repeated requests. Bounded by entries and bytes; only 200s without
Set-Cookie or `Cache-Control: no-store` (a training path's progress) are kept.

Conditional requests reach this layer without their conditions: the HTTP cache
middleware (outside) takes If-None-Match off, lets this layer replay the 200 and
answers 304 from its hash, so a revalidation costs a lookup and a hash. A request
that still carries a condition (this layer used on its own) or a Range passes through.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CACHED_PREFIXES = ("/api/walkthroughs", "/api/processes", "/walkthroughs/", "/static/")
CACHED_PATHS = frozenset({"/", "/docs", "/openapi.json"})
# Pages link static files root-relative, so Host does not change a body. HX-Target picks a part of a
# page a kind's route may answer alone (a figure's body), so it keys the entry too (rendering.VARY).
KEY_HEADERS = (b"hx-request", b"hx-history-restore-request", b"hx-target")


class ResponseCacheMiddleware:
    def __init__(self, app: ASGIApp, max_entries: int = 2048, max_bytes: int = 64 * 1024 * 1024,
                 max_entry_bytes: int = 2 * 1024 * 1024, skip=None) -> None:
        self.app = app
        self.skip = skip or (lambda path: False)  # paths whose answer can change (evictable uploads)
        self.max_entries, self.max_bytes, self.max_entry_bytes = max_entries, max_bytes, max_entry_bytes
        self._entries: OrderedDict[tuple, tuple[int, list, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def _key(self, scope: Scope) -> tuple | None:
        if scope["type"] != "http" or scope["method"] != "GET":
            return None
        path = scope["path"]
        if not (path in CACHED_PATHS or path.startswith(CACHED_PREFIXES)) or self.skip(path):
            return None
        headers = dict(scope["headers"])
        if b"if-none-match" in headers or b"if-modified-since" in headers or b"range" in headers:
            return None
        gzip = b"gzip" in headers.get(b"accept-encoding", b"")
        return (path, scope.get("query_string", b""), gzip, *(headers.get(h) for h in KEY_HEADERS))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = self._key(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
        if hit is not None:
            status, headers, body = hit
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return

        start: Message | None = None
        chunks: list[bytes] = []
        size = 0

        async def capture(message: Message) -> None:
            nonlocal start, size
            if message["type"] == "http.response.start":
                # A copy: outer middleware adds its headers to the message it is sent.
                start = {**message, "headers": list(message.get("headers", []))}
            elif message["type"] == "http.response.body" and size <= self.max_entry_bytes:
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self._store(key, start, chunks, size)

        await self.app(scope, receive, capture)

    def _store(self, key: tuple, start: Message | None, chunks: list[bytes], size: int) -> None:
        if start is None or start["status"] != 200 or size > self.max_entry_bytes:
            return
        headers = list(start.get("headers", []))
        if any(name.lower() == b"set-cookie" for name, _ in headers):
            return
        # A route that says no-store answers from state that changes (a training run in progress).
        if any(name.lower() == b"cache-control" and b"no-store" in value.lower() for name, value in headers):
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (200, headers, b"".join(chunks))
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, _, old) = self._entries.popitem(last=False)
                self._bytes -= len(old)

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes}
