"""The bodies of GET /healthz and GET /readyz."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.web.schemas.base import Body, optional_key


class HealthBody(Body):
    """The process is up and serving."""

    status: Literal["ok"] = Field(description="Always \"ok\" when the server answers.")


class ReadyBody(Body):
    """Whether the process serves its first pages at warm speed (app/web/warm_up.py)."""

    ready: bool = Field(description="True once the warm-up is done (or with WARM_UP off).")
    warm_up: Literal["off"] = optional_key("\"off\" when the server does not warm up (WARM_UP=0): ready at once.")
    stage: Literal["starting", "compute workers warming", "first pages", "ready"] = optional_key(
        "Where the warm-up stands: the compute workers drawing the featured steps, then the web process "
        "requesting the first pages through itself.")
    seconds: float = optional_key("Seconds since the warm-up began (until it ended, once ready).")
    pages: int = optional_key("First pages requested so far (the house's and every featured step).")
    failed: int = optional_key("Of those, the ones that failed to draw (logged; the server still serves).")
