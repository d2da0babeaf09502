"""The tiny-LM walkthrough's step page: the same URL and template as any walkthrough, its
numbers from the token-level engine. Thin: parsing and building live in views/token_screen.py."""
from __future__ import annotations

from fastapi import Request
from starlette.responses import RedirectResponse

from ...domain.snapshot import Snapshot
from ...engine.params import GRPOParams
from ...views.token_screen import BadTokenView, build_token_screen, read_token_query
from ...views.view_state import UnknownViewPart, ViewState
from ...views.walkthrough_list import list_walkthroughs
from ..errors import NotFound
from ..rendering import render, wants_fragment

PAGE, VIEW, FORM = "pages/walkthrough.html", "partials/view.html", "partials/token_form.html"


def token_step_work(request: Request, walkthrough_id: str, step_id: str, snapshot: Snapshot, cat, dev: str):
    query = request.query_params
    try:
        q = read_token_query(query)
        state = ViewState.parse(snapshot, walkthrough_id, step_id, expanded=query.get("expanded"),
                                node=query.get("node"), params=GRPOParams(), view=query.get("view"),
                                extra=q.extra())
        screen = build_token_screen(snapshot, state, dev, q)
    except (UnknownViewPart, BadTokenView) as exc:
        raise NotFound(str(exc)) from None
    context = {"screen": screen, "catalog": cat, "compare": None,
               "switch": list_walkthroughs(cat.entries(), walkthrough_id)}
    if q.form is not None:
        if wants_fragment(request):  # the previous view stays: only the form is swapped
            return render(request, FORM, FORM, context, 422,
                          {"HX-Retarget": "#token-form", "HX-Reswap": "outerHTML", "HX-Push-Url": "false"})
        return render(request, PAGE, VIEW, context, 422)
    canonical = screen.url()
    if not wants_fragment(request) and dict(query) != state.query(snapshot):
        return RedirectResponse(canonical, status_code=303)
    headers = {"HX-Push-Url": canonical} if wants_fragment(request) else None
    return render(request, PAGE, VIEW, context, headers=headers)
