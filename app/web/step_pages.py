"""What every kind's step page ends with: the context, the refused-form answer and the canonical
step response. One place, so the kinds' pages (and the view-only one) cannot drift apart."""
from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from app.domain.catalog import Catalog
from app.views.screen import Screen
from app.views.walkthrough_list import list_walkthroughs
from app.web.rendering import render, wants_fragment

PAGE, VIEW = "pages/walkthrough.html", "partials/view.html"


def step_context(screen: Screen, cat: Catalog, compare: Any = None) -> dict:
    return {"screen": screen, "catalog": cat, "compare": compare,
            "switch": list_walkthroughs(cat.entries(), cat.featured, screen.state.walkthrough_id)}


def refused_form(request: Request, form_template: str, form_id: str, context: dict) -> Response:
    """A 422 for refused parameters: as htmx, only the form is swapped (the previous view stays and
    the URL is not pushed); as a page, the whole view with the form naming each refusal."""
    if wants_fragment(request):
        return render(request, form_template, form_template, context, 422,
                      {"HX-Retarget": f"#{form_id}", "HX-Reswap": "outerHTML", "HX-Push-Url": "false"})
    return render(request, PAGE, VIEW, context, 422)


def step_response(request: Request, screen: Screen, context: dict, headers: dict | None = None) -> Response:
    """The step as a page or fragment. A full page asked with a non-canonical query (a default
    spelled out, an old key) gets a 303 to the canonical URL; `/` shows the default walkthrough's
    opening step as it is."""
    canonical = screen.url()
    if not wants_fragment(request) and request.url.path != "/" and \
            dict(request.query_params) != screen.state.query(screen.snapshot):
        return RedirectResponse(canonical, status_code=303)
    sent = {"HX-Push-Url": canonical} if wants_fragment(request) else {}
    sent.update(headers or {})
    return render(request, PAGE, VIEW, context, headers=sent or None)
