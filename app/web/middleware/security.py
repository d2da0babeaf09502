"""Security headers on every response: pages, fragments, JSON and static files."""
from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# No 'unsafe-inline' anywhere: all script and style come from /static.
APP_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; "
           "form-action 'self'; frame-ancestors 'none'")
# FastAPI's /docs and /redoc load Swagger UI / ReDoc from a CDN with an inline bootstrap script.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
            "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
            "img-src 'self' data: https://fastapi.tiangolo.com; "
            "object-src 'none'; base-uri 'self'; frame-ancestors 'none'")
DOCS_PATHS = ("/docs", "/redoc")

STATIC_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class SecurityHeadersMiddleware:
    """Pure ASGI (not BaseHTTPMiddleware): adds headers without buffering bodies."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.app_csp = APP_CSP.encode()
        self.docs_csp = DOCS_CSP.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = self.docs_csp if scope["path"].startswith(DOCS_PATHS) else self.app_csp

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += STATIC_HEADERS
                headers.append((b"content-security-policy", csp))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def security_headers(path: str) -> dict[str, str]:
    """The same headers as a dict, for responses built outside the middleware (500s)."""
    csp = DOCS_CSP if path.startswith(DOCS_PATHS) else APP_CSP
    return {**{k.decode(): v.decode() for k, v in STATIC_HEADERS}, "content-security-policy": csp}
