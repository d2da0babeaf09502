"""Security headers on every response: pages, fragments, JSON and static files."""
from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# One policy for every response, /docs included: no 'unsafe-inline' anywhere, nothing from
# another host; all script and style come from /static (Swagger UI too: static/vendor/swagger-ui-*).
# img-src allows data: for the SVG icons that app.css and swagger-ui.css embed as data: URLs.
APP_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; "
           "form-action 'self'; frame-ancestors 'none'")

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
        self.csp = APP_CSP.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += STATIC_HEADERS
                headers.append((b"content-security-policy", self.csp))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def security_headers() -> dict[str, str]:
    """The same headers as a dict, for responses built outside the middleware (500s)."""
    return {**{k.decode(): v.decode() for k, v in STATIC_HEADERS}, "content-security-policy": APP_CSP}
