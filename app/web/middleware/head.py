"""HEAD wherever GET answers, and a 405 that names every method its path takes.

FastAPI's GET routes take GET only, and listing HEAD on each would give every operation a
`head` twin in /openapi.json. So a HEAD request is served here as the GET it mirrors: the
same status and headers (Content-Length included), an empty body (RFC 9110 §9.3.2). Pure
ASGI, outermost: the response cache, compression and security headers see a GET.

A 405's Allow header comes from the first route whose path matched (Starlette), so
DELETE /api/walkthroughs would name GET and hide POST. It is rewritten from every method
some route answers at that path (each asked through `matches`, which included routers
answer too), with HEAD wherever GET is; mounts (/static) keep their own.
"""
from __future__ import annotations

from starlette.routing import Match, Mount, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


class HeadMiddleware:
    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"
        if head:
            scope = {**scope, "method": "GET"}

        async def send_head(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                message = {**message, "headers": self._with_allow(scope, message.get("headers", []))}
            elif head and message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        await self.app(scope, receive, send_head)

    def _with_allow(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        methods: set[str] = set()
        for name, value in headers:
            if name.lower() == b"allow":
                methods.update(m.strip() for m in value.decode("latin-1").split(",") if m.strip())
        routes = [r for r in self.router.routes if not isinstance(r, Mount)]
        methods.update(m for m in METHODS
                       if any(r.matches({**scope, "method": m})[0] == Match.FULL for r in routes))
        if "GET" in methods:
            methods.add("HEAD")
        kept = [(n, v) for n, v in headers if n.lower() != b"allow"]
        return [*kept, (b"allow", ", ".join(sorted(methods)).encode())] if methods else kept
