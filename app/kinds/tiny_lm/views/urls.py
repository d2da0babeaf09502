"""The tiny-LM kind's own links: its tokens API and a training path's page."""
from __future__ import annotations

from collections.abc import Mapping

from app.views.urls import URLS, segment, with_query


def tokens(walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
    return with_query(f"/api/walkthroughs/{segment(walkthrough_id)}/tokens", query)


def lm_path(walkthrough_id: str, path: str, query: Mapping[str, str] | None = None) -> str:
    return with_query(f"{URLS.walkthrough(walkthrough_id)}/paths/{segment(path)}", query)
