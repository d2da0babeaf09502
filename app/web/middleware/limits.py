"""Limits at the edge of the server: request bodies (an ASGI middleware), header size and the
time allowed to send the headers (a small subclass of uvicorn's httptools protocol).

What uvicorn offers and what it does not (uvicorn 0.5x):
- `timeout_keep_alive`: closes a connection idle *between* requests. Passed as KEEP_ALIVE_S.
- `h11_max_incomplete_event_size`: only the pure-Python h11 protocol reads it, and h11 answers an
  oversize head with uvicorn's generic 400. The default protocol, httptools, has no limit at
  all (a 64 MB header was read whole) and no header timeout either. `HeaderLimitProtocol` below
  is the httptools protocol plus both: 431 past `h11_max_incomplete_event_size` bytes of head,
  408 (or a silent close on a connection that never sent a byte) past HEADER_TIMEOUT_S.
- Nothing for bodies: `BodyLimitMiddleware` refuses a body over the cap (413) and stops handing
  it to the app at the cap, so multipart parsing never spools more than the cap to disk.
- Both protocols close the connection as soon as a `Connection: close` response is written, and
  a close with request bytes still unread makes the kernel send a reset: a client that writes
  its whole body before reading (`urllib`, `requests`) then gets ECONNRESET or a broken pipe
  instead of the 413 (urllib, measured: 43 of 100 uploads of 3 MB, 100 of 100 of 33 MB). Neither
  lets an app read after its response is complete. So the 413 waits until the rest of the body
  has been read and dropped (`drain`: at most DRAIN_MAX_BYTES, DRAIN_S in all, and the header
  timeout between two reads; past a bound the close may reset). A client that sent
  `Expect: 100-continue` has sent no body yet (no 100 is ever written to it): it is answered
  at once, as is a Content-Length past DRAIN_MAX_BYTES.
"""
from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.domain.uploads import MB
from app.web.settings import Settings

# The upload routes take one file of at most the app's upload limit (the largest of the formats its
# kinds open: KindRegistry.upload_limit; the store applies each format's own) inside a multipart
# form: boundaries, part headers and a file name add well under MULTIPART_OVERHEAD.
MULTIPART_OVERHEAD = 64 * 1024
UPLOAD_ROUTES = frozenset({("POST", "/api/walkthroughs"), ("POST", "/walkthroughs/new")})

# How long an oversize or timed-out connection is still read (and discarded) after its error is
# written, so the client's kernel does not reset the connection before the client reads it.
LINGER_S = 1.0
# The rest of an over-limit body is read and dropped before its 413 (see the module's notes):
# at most this many bytes, for at most DRAIN_S in all and the header timeout between two reads.
DRAIN_MAX_BYTES = 1024 * MB
DRAIN_S = 30.0


class BodyTooLarge(Exception):
    """Raised into the app from `receive` when the body passes its cap."""


class BodyLimitMiddleware:
    """413 for a body over its cap, known from Content-Length or counted as it streams.

    The cap is `max_bytes`, or on the upload routes the largest file (`upload_limit`) plus the
    form's overhead; `upload_limits` says, for people, what each format may be. The app never sees
    more than the cap; the rest is drained (`drain`) before the 413, which says `Connection: close`.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, upload_limit: int, upload_limits: str,
                 upload_routes: frozenset[tuple[str, str]] = UPLOAD_ROUTES) -> None:
        self.app, self.max_bytes = app, max_bytes
        self.upload_max_bytes, self.upload_routes = upload_limit + MULTIPART_OVERHEAD, upload_routes
        self.upload_limits = upload_limits

    def _too_large_message(self, cap: int) -> str:
        if cap >= self.upload_max_bytes:
            return f"the request body is larger than the upload limit ({self.upload_limits})"
        return f"the request body is larger than {cap} bytes"

    def cap(self, scope: Scope) -> int:
        own = _own_cap(scope)
        if own is not None:
            return own[0]
        return self.upload_max_bytes if (scope["method"], scope["path"]) in self.upload_routes else self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.cap(scope)
        declared = _content_length(scope)
        if declared is not None and declared > cap:
            # Unread: a client waiting for its 100 Continue has sent nothing (and gets none), and
            # past DRAIN_MAX_BYTES the close may reset anyway; any other is drained first.
            if not _expects_continue(scope) and declared <= DRAIN_MAX_BYTES:
                await drain(receive)
            await self.refuse(scope, receive, send, cap)
            return

        received = 0
        exceeded = started = ended = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded, ended
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                ended = not message.get("more_body", False)
                if received > cap:
                    exceeded = True
                    raise BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded:  # the app's own answer to the cut body (e.g. a 400 "error parsing the body")
                return
            started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except BodyTooLarge:
            pass
        except Exception:
            if not exceeded:
                raise
        if exceeded and not started:
            if not ended:
                await drain(receive, received)
            await self.refuse(scope, receive, send, cap)

    async def refuse(self, scope: Scope, receive: Receive, send: Send, cap: int) -> None:
        own = _own_cap(scope)
        message = own[1] if own is not None else self._too_large_message(cap)
        if scope["path"].startswith("/api") or scope["method"] != "POST":
            body = json.dumps({"error": message}).encode()
            await send({"type": "http.response.start", "status": 413, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        from app.web.rendering import render_error  # templates load on first use, not on import

        response = render_error(Request(scope), 413, "Upload refused", message)
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


def allow_body(app: Any, method: str, path: str, max_bytes: int, message: str) -> None:
    """A route of a kind's that takes a body of its own size (a whole run's archive: RUN_UPLOAD_MAX_MB), past
    which its 413 says `message`. Called at install; read from the app's state at each request (scope["app"])."""
    caps = getattr(app.state, "body_caps", None)
    if caps is None:
        caps = app.state.body_caps = {}
    caps[(method, path)] = (max_bytes, message)


def _own_cap(scope: Scope) -> tuple[int, str] | None:
    caps = getattr(getattr(scope.get("app"), "state", None), "body_caps", None)
    return caps.get((scope["method"], scope["path"])) if caps else None


async def drain(receive: Receive, drained: int = 0) -> bool:
    """Read and drop the rest of a request body: True once it has ended (or the client has gone),
    False at a bound (DRAIN_MAX_BYTES in all, DRAIN_S, the header timeout between two reads).

    Every read is an await on the server's own receive: the event loop serves other connections
    meanwhile, and no compute slot or thread is held (this runs after the app has returned).
    """
    loop = asyncio.get_running_loop()
    deadline, idle_s = loop.time() + DRAIN_S, header_timeout_s()
    while drained <= DRAIN_MAX_BYTES:
        try:
            async with asyncio.timeout(min(idle_s, max(0.0, deadline - loop.time()))):
                message = await receive()
        except TimeoutError:
            return False
        if message["type"] != "http.request":
            return True  # http.disconnect: nothing left to read
        drained += len(message.get("body", b""))
        if not message.get("more_body", False):
            return True
    return False


def _expects_continue(scope: Scope) -> bool:
    return any(name == b"expect" and value.lower() == b"100-continue" for name, value in scope["headers"])


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


@functools.cache
def header_timeout_s() -> float:
    """HEADER_TIMEOUT_S, read once per process (`python -m app` sets it for its workers too)."""
    return Settings().header_timeout_s


class HeaderLimitProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a cap on the request head (431) and a header timeout.

    Select it with `uvicorn.run(..., http="app.web.middleware.limits:HeaderLimitProtocol",
    h11_max_incomplete_event_size=<bytes>)`; the timeout is HEADER_TIMEOUT_S.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head = self.config.h11_max_incomplete_event_size or 64 * 1024
        self.header_timeout = header_timeout_s()
        self.head_bytes = 0  # bytes received since the current request's head began
        self.in_head = True  # reading a request head (or waiting for one)
        self.header_timer: asyncio.TimerHandle | None = None
        self.refused = False
        self.message_ended = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:  # lingering after a 431/408: read and drop
            return
        self.message_ended = False
        super().data_received(data)
        if self.in_head and not self.message_ended and not self.transport.is_closing():
            # (a chunk that also ended the previous message is not counted: at most one chunk short)
            self.head_bytes += len(data)
            if self.head_bytes > self.max_head:
                self.logger.warning("Request head over %d bytes: 431.", self.max_head)
                self._refuse(431, "Request Header Fields Too Large",
                             f"request headers over {self.max_head} bytes")

    # parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.in_head = True
        if self.header_timer is None:
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self.in_head, self.head_bytes = False, 0
        self._disarm_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.in_head, self.head_bytes, self.message_ended = True, 0, True

    # the timer
    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self.header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)

    def _disarm_header_timer(self) -> None:
        timer, self.header_timer = self.header_timer, None
        if timer is not None:
            timer.cancel()

    def _header_timed_out(self) -> None:
        self.header_timer = None
        if self.transport.is_closing() or not self.in_head:
            return
        if self.head_bytes == 0:
            self.transport.close()  # nothing sent at all: an idle connection, closed without a word
            return
        self.logger.warning("Request head not complete within %g s: 408.", self.header_timeout)
        self._refuse(408, "Request Timeout", f"request headers not complete within {self.header_timeout:g} s")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        body = message.encode()
        head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
        self.refused = True
        self._disarm_header_timer()
        self._unset_keepalive_if_required()
        self.transport.write(head + body)
        # Half-close and keep draining a moment: closing with unread data would send a reset
        # that can destroy the answer before the client reads it.
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()


def uvicorn_options(max_header_bytes: int, keep_alive_s: int) -> dict[str, object]:
    """The keyword arguments of `uvicorn.run` that set these limits."""
    return {"http": f"{HeaderLimitProtocol.__module__}:{HeaderLimitProtocol.__qualname__}",
            "h11_max_incomplete_event_size": max_header_bytes, "timeout_keep_alive": keep_alive_s}


__all__ = ["BodyLimitMiddleware", "BodyTooLarge", "allow_body", "HeaderLimitProtocol", "MULTIPART_OVERHEAD",
           "drain", "uvicorn_options", "header_timeout_s"]
