"""The toy's step page: the shared page and view templates, its numbers from the toy's engine.
Thin, and one way: the URL is parsed (views/url_state.py), the engine obtains every number the page
needs (engine/step_inputs.py), then the views build the screen from them (screen.py, compare_view.py)."""
from __future__ import annotations

from pydantic import ValidationError
from starlette.responses import Response

from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step_inputs import obtain
from app.kinds.toy.views.compare_view import build_compare_view
from app.kinds.toy.views.figure_control import FIGURE_BODY_ID
from app.kinds.toy.views.form import FORM_FIELDS, ParamForm
from app.kinds.toy.views.screen import build_screen
from app.kinds.toy.views.url_state import parse_compare, parse_view
from app.views.view_state import UnknownViewPart
from app.web.errors import NotFound
from app.web.kind import StepRequest
from app.web.rendering import render, wants_fragment
from app.web.step_pages import PAGE, VIEW, refused_form, step_context, step_response

FORM = "toy/param_form.html"
FIGURE, FIGURE_REFUSED = "toy/figure_fragment.html", "toy/figure_refused.html"


def _typed(request, name: str) -> str | None:
    """One parameter as typed. `rewards` may come once per completion (the reward inputs at the advantages
    figure, toy/figure_control.html): the values join into the one comma list the URL writes."""
    if name == "rewards" and len(given := request.query_params.getlist(name)) > 1:
        return ",".join(v.strip() for v in given)
    return request.query_params.get(name)


def _read_params(request) -> tuple[GRPOParams, ParamForm | None]:
    """Valid params, or the defaults plus a form that shows what was typed and why it failed."""
    raw = {k: v.strip() for k in FORM_FIELDS if (v := _typed(request, k)) is not None and v.strip() != ""}
    try:
        return GRPOParams(**raw), None
    except ValidationError as exc:
        return GRPOParams(), ParamForm.refused(raw, exc.errors())


def step_page(asked: StepRequest):
    request, walkthrough_id, step_id, snapshot = asked.request, asked.walkthrough_id, asked.step_id, asked.snapshot
    cat, dev, processes = asked.catalog, asked.device, request.app.state.processes
    params, invalid_form = _read_params(request)
    compare = parse_compare(request.query_params)  # Compare mode: side B from the vs_ parameters
    try:
        state = parse_view(snapshot, walkthrough_id, step_id, expanded=request.query_params.get("expanded"),
                                node=request.query_params.get("node"), params=params,
                                process=request.query_params.get("process"), stage=request.query_params.get("stage"),
                                processes=processes, view=request.query_params.get("view"),
                                compare=compare.conventions)
    except UnknownViewPart as exc:
        raise NotFound(str(exc)) from None
    # One way: the engine's results first (a step, a path's runs, Compare's side B; cached or from
    # the job store), then the screen and the Compare panel from them, then the template.
    own = state.own
    inputs = obtain(own.params, dev, processes, own.process, own.stage,
                    own.compare if compare.on and own.compare is not None else None,
                    jobs=request.app.state.context.jobs)
    screen = build_screen(snapshot, state, inputs, invalid_form, processes)
    context = step_context(screen, cat, build_compare_view(screen, compare, inputs))
    if wants_fragment(request) and request.headers.get("HX-Target") == FIGURE_BODY_ID:
        return _figure_response(request, screen, context, invalid_form)
    if invalid_form is not None:
        return refused_form(request, FORM, "param-form", context)
    if compare.errors:  # the compare form names each refused vs_ parameter
        return render(request, PAGE, VIEW, context, 422)
    return step_response(request, screen, context)


def _figure_response(request, screen, context: dict, invalid_form: ParamForm | None) -> Response:
    """A change at the figure's control (toy/figure_control.html): the figure's body alone, its URL in
    HX-Replace-Url (the address bar follows without a history entry per slider step). Refused parameters
    keep the figure as it was: a 422 that swaps nothing but the refusal beside the control."""
    if invalid_form is not None:
        text = "; ".join(f"{name}: {message}" for name, message in invalid_form.errors.items())
        return render(request, FIGURE_REFUSED, FIGURE_REFUSED, {**context, "text": text}, 422,
                      {"HX-Reswap": "none", "HX-Push-Url": "false"})
    return render(request, FIGURE, FIGURE, context, headers={"HX-Replace-Url": screen.url()})
