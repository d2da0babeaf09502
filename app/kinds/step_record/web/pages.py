"""A recorded step's page: the same URL and template as any walkthrough, its numbers recomputed
from the record (engine/). One way: the URL is read, the engine recomputes (or its cache answers),
then views/screen.py builds the screen from those results."""
from __future__ import annotations

from dataclasses import replace

from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.cache import recomputed
from app.kinds.step_record.views.screen import BadRecordPlace, build_record_screen, check_place
from app.kinds.step_record.views.url_state import BadRecordView, read_record_query
from app.views.view_state import UnknownViewPart, ViewState
from app.web.errors import NotFound
from app.web.kind import StepRequest
from app.web.step_pages import step_context, step_response


def step_page(asked: StepRequest):
    request, snapshot = asked.request, asked.snapshot
    record = asked.entry.payload
    assert isinstance(record, StepRecord)
    query = request.query_params
    try:
        q = read_record_query(query)
        state = ViewState.parse(snapshot, asked.walkthrough_id, asked.step_id, expanded=query.get("expanded"),
                                node=query.get("node"), view=query.get("view"), own=q)
        check_place(record, q)
    except (UnknownViewPart, BadRecordView, BadRecordPlace) as exc:
        raise NotFound(str(exc)) from None
    # One way: the engine's results first (kept per record and conventions), then the screen from them.
    own = recomputed(asked.entry.id, record)
    what_if = q.conventions(own.conventions)
    other = recomputed(asked.entry.id, record, what_if) if what_if is not None else None
    screen = build_record_screen(snapshot, state, record, own, other)
    # a run's recorded step (opened from its explorer): its panel links the run and the steps beside it,
    # as the house's runs say (app/runs, Kind.part_of): this kind keeps no runs
    part_of = request.app.state.kinds.part_of(request, asked.walkthrough_id)
    if part_of is not None:
        screen = replace(screen, part_of=part_of)
    return step_response(request, screen, step_context(screen, asked.catalog))
