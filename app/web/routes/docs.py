"""The API reference page (/docs): Swagger UI from /static, under the app's one CSP.

FastAPI's own /docs loads Swagger UI from a CDN with an inline script; this page serves the
vendored copy (static/vendor/swagger-ui-*) and starts it from static/js/swagger-init.js.
"""
from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse

from app.web.rendering import templates_of

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    return templates_of(request).TemplateResponse(request, "pages/api_docs.html", {
        "title": request.app.title, "openapi_url": request.app.openapi_url})
