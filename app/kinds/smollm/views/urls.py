"""The real-model kind's own links: the step's progress box, the R1-Zero paths panel, and the tiny LM's page
that runs the same training path."""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from app.views.urls import URLS


def progress(walkthrough_id: str, query: Mapping[str, str]) -> str:
    """The progress box a step page polls while its step runs."""
    return f"{URLS.walkthrough(walkthrough_id)}/smollm-progress?{urlencode(query)}"


def r1_zero_paths(walkthrough_id: str, step_id: str, seed: int, process: str | None = None) -> str:
    """The R1-Zero paths panel: a POST starts the run; with `process`, the GET the panel polls."""
    query = {"step": step_id, "seed": str(seed), **({"process": process} if process is not None else {})}
    return URLS.paths_panel(walkthrough_id, "r1-zero", query)  # the house's address for a path's box


def tiny_lm_path(path: str) -> str:
    """The tiny LM's walkthrough (by its shipped id) with the same training path open."""
    return f"/walkthroughs/tiny_lm_grpo/steps/sample?process={path}#lm-path-panel"
