"""The step-record kind's own links: a recorded step's numbers and the format's JSON Schema."""
from __future__ import annotations

from collections.abc import Mapping

from app.views.urls import URLS


def record(walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
    return URLS.step_api(walkthrough_id, query)


def record_schema() -> str:
    return "/api/schemas/step-record"
