"""Every link the app makes, built in one place (as datasette's `url_builder.Urls`).

Links are root-relative and built from ids the app validated, each path segment
quoted, never from the Host header.
"""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from ..engine.params import GRPOParams
from . import numbers


def _segment(value: str) -> str:
    return quote(value, safe="")


def _with_query(path: str, query: Mapping[str, str] | None) -> str:
    return f"{path}?{urlencode(query)}" if query else path


def params_query(params: GRPOParams) -> dict[str, str]:
    """The non-default parameters as URL query values (view state lives in the URL)."""
    out = {}
    for name, value in params.model_dump(exclude_defaults=True).items():
        out[name] = ",".join(numbers.param(v) for v in value) if name == "rewards" else numbers.param(value)
    return out


class Urls:
    def home(self) -> str:
        return "/"

    def upload_form(self) -> str:
        return "/walkthroughs/new"

    def walkthrough(self, walkthrough_id: str) -> str:
        return f"/walkthroughs/{_segment(walkthrough_id)}"

    def step(self, walkthrough_id: str, step_id: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"{self.walkthrough(walkthrough_id)}/steps/{_segment(step_id)}", query)

    def tensors(self, walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"/api/walkthroughs/{_segment(walkthrough_id)}/tensors", query)

    def api_docs(self) -> str:
        return "/docs"

    def process(self, process_id: str) -> str:
        return f"/api/processes/{_segment(process_id)}"


URLS = Urls()
