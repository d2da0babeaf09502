"""Error bodies of the JSON API (built in app/web/errors.py) and their OpenAPI entries."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from app.web.schemas.base import Body, optional_key


class ErrorBody(Body):
    """Every refusal of the API: one message a person can read."""

    error: str = Field(description="What went wrong, e.g. \"unknown walkthrough 'x'\".")


class NotStartedBody(ErrorBody):
    """A 404 of a route that reads runs: an unknown id (`error` alone), or runs nobody started (a GET
    never starts one), with the request that starts them."""

    start: str | None = optional_key("The request that starts the runs, e.g. \"POST /api/walkthroughs/{id}/"
                                     "paths/{path}?seed=3\"; absent for an unknown id.")
    runs: list[str] | None = optional_key("The runs nobody started yet, by title; absent for an unknown id.")


class ParamError(Body):
    """One refused parameter."""

    param: str = Field(description="The query parameter refused (\"request\" when none can be named).")
    message: str = Field(description="Why it was refused.")
    allowed: str | None = Field(description="Its allowed range, e.g. \"2 <= group_size <= 4096\"; "
                                            "null when it has no numeric bounds.")


class ValidationErrorBody(Body):
    """A refused request (422): the message, then each refused parameter."""

    error: str = Field(description="All refusals in one line: \"param: message (allowed: range)\", "
                                   "joined by \"; \".")
    detail: list[ParamError] = Field(description="The refused parameters, one entry each.")


def error(description: str, model: Any = ErrorBody, **extra: Any) -> dict[str, Any]:
    """One `responses=` entry: the body model and when it is sent."""
    return {"model": model, "description": description, **extra}


INVALID = error("A parameter is out of range or malformed; `detail` names each one.", ValidationErrorBody)
BUSY = error("Every compute slot is taken and the waiting line is full: retry shortly.",
             headers={"Retry-After": {"description": "Seconds to wait before retrying.",
                                      "schema": {"type": "integer"}}})
