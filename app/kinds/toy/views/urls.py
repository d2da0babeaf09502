"""The toy kind's own links: its tensors and compare APIs and its training paths' API."""
from __future__ import annotations

from collections.abc import Mapping

from app.views.urls import URLS, segment, with_query


def tensors(walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
    return URLS.step_api(walkthrough_id, query)


def compare(walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
    return with_query(f"/api/walkthroughs/{segment(walkthrough_id)}/compare", query)


def process(process_id: str) -> str:
    return f"/api/processes/{segment(process_id)}"
