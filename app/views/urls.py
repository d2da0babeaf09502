"""The house's links, built in one place (as datasette's `url_builder.Urls`); each kind builds its
own endpoints' links in its views/urls.py with `segment` and `with_query`.

Links are root-relative and built from ids the app validated, each path segment
quoted, never from the Host header.
"""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from app.engine.grpo.params import OFF, Conventions
from app.views import numbers


def segment(value: str) -> str:
    """One path segment, quoted whole ("/" included)."""
    return quote(value, safe="")


def with_query(path: str, query: Mapping[str, str] | None) -> str:
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


# The addresses the house owns for every kind (app/web/routes/kind_routes.py), as path templates
STEP_API = "/api/walkthroughs/{walkthrough_id}/step"  # the step's JSON
PATHS_API = "/api/walkthroughs/{walkthrough_id}/paths/{path}"  # a training path's run (JSON)
PATHS_PANEL = "/walkthroughs/{walkthrough_id}/paths/{path}"  # a training path's box on the page (HTML)


class Urls:
    def home(self) -> str:
        return "/"

    def walkthroughs(self) -> str:
        return "/walkthroughs"

    def upload_form(self) -> str:
        return "/walkthroughs/new"

    def walkthrough(self, walkthrough_id: str) -> str:
        return f"/walkthroughs/{segment(walkthrough_id)}"

    def step(self, walkthrough_id: str, step_id: str, query: Mapping[str, str] | None = None) -> str:
        return with_query(f"{self.walkthrough(walkthrough_id)}/steps/{segment(step_id)}", query)

    def step_api(self, walkthrough_id: str, query: Mapping[str, str] | None = None) -> str:
        return with_query(STEP_API.format(walkthrough_id=segment(walkthrough_id)), query)

    def paths_api(self, walkthrough_id: str, path: str, query: Mapping[str, str] | None = None) -> str:
        return with_query(PATHS_API.format(walkthrough_id=segment(walkthrough_id), path=segment(path)), query)

    def paths_panel(self, walkthrough_id: str, path: str, query: Mapping[str, str] | None = None) -> str:
        return with_query(PATHS_PANEL.format(walkthrough_id=segment(walkthrough_id), path=segment(path)), query)

    def api_docs(self) -> str:
        return "/docs"


URLS = Urls()
