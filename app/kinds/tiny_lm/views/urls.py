"""The tiny-LM kind's own links: its tokens API and a training path's page."""
from __future__ import annotations

from collections.abc import Mapping

from app.views.urls import URLS


def tokens(walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
    return URLS.step_api(walkthrough_id, query)


def lm_path(walkthrough_id: str, path: str, query: Mapping[str, str] | None = None) -> str:
    return URLS.paths_panel(walkthrough_id, path, query)
