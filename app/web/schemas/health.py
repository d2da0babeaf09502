"""The body of GET /healthz."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.web.schemas.base import Body


class HealthBody(Body):
    """The process is up and serving."""

    status: Literal["ok"] = Field(description="Always \"ok\" when the server answers.")
