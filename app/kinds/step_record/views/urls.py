"""The step-record kind's own links: a recorded step's numbers and the format's JSON Schema."""
from __future__ import annotations

from collections.abc import Mapping

from app.views.urls import segment, with_query


def record(walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
    return with_query(f"/api/walkthroughs/{segment(walkthrough_id)}/record", query)


def record_schema() -> str:
    return "/api/schemas/step-record"
