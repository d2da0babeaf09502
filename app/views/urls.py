"""Every link the app makes, built in one place (as datasette's `url_builder.Urls`).

Links are root-relative and built from ids the app validated, each path segment
quoted, never from the Host header.
"""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from app.engine.grpo.params import OFF, Conventions
from app.views import numbers


def _segment(value: str) -> str:
    return quote(value, safe="")


def _with_query(path: str, query: Mapping[str, str] | None) -> str:
    return f"{path}?{urlencode(query)}" if query else path


def query_value(name: str, value) -> str:
    """One parameter as its URL query value."""
    if name == "rewards":
        return ",".join(numbers.param(v) for v in value)
    if value is None:
        return OFF  # a preset's dual clip or clamp turned off
    if isinstance(value, (bool, str)):
        return str(value).lower()
    return numbers.param(value)


def params_query(params: Conventions) -> dict[str, str]:
    """The non-default parameters as URL query values (view state lives in the URL)."""
    return {name: query_value(name, value) for name, value in params.url_overrides().items()}


COMPARE_PREFIX = "vs_"  # side B of Compare mode: vs_preset, vs_beta, ... (conventions only)


def conventions_query(conventions: Conventions, prefix: str = COMPARE_PREFIX) -> dict[str, str]:
    """Side B as URL query values: always its preset (so Compare mode shows in the URL even
    when B is the default), then what differs from that preset."""
    out: dict[str, str] = {f"{prefix}preset": conventions.preset}
    for name, value in conventions.url_overrides().items():
        if name != "preset":
            out[prefix + name] = query_value(name, value)
    return out


class Urls:
    def home(self) -> str:
        return "/"

    def walkthroughs(self) -> str:
        return "/walkthroughs"

    def upload_form(self) -> str:
        return "/walkthroughs/new"

    def walkthrough(self, walkthrough_id: str) -> str:
        return f"/walkthroughs/{_segment(walkthrough_id)}"

    def step(self, walkthrough_id: str, step_id: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"{self.walkthrough(walkthrough_id)}/steps/{_segment(step_id)}", query)

    def tensors(self, walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"/api/walkthroughs/{_segment(walkthrough_id)}/tensors", query)

    def lm_path(self, walkthrough_id: str, path: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"{self.walkthrough(walkthrough_id)}/paths/{_segment(path)}", query)

    def tokens(self, walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"/api/walkthroughs/{_segment(walkthrough_id)}/tokens", query)

    def compare(self, walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
        return _with_query(f"/api/walkthroughs/{_segment(walkthrough_id)}/compare", query)

    def record(self, walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
        """A recorded step's numbers (the step-record kind's API)."""
        return _with_query(f"/api/walkthroughs/{_segment(walkthrough_id)}/record", query)

    def record_schema(self) -> str:
        return "/api/schemas/step-record"

    def api_docs(self) -> str:
        return "/docs"

    def process(self, process_id: str) -> str:
        return f"/api/processes/{_segment(process_id)}"


URLS = Urls()
