"""The bodies `POST /api/runs` answers (OpenAPI only: the route sends its dicts, the tests validate them here)."""
from __future__ import annotations

from pydantic import Field

from app.web.schemas.base import Body, optional_key
from app.web.schemas.errors import ErrorBody


class RecordedStep(Body):
    step: int = Field(description="The training step the record is of (read from the record, not its file name).")
    walkthrough: str = Field(description="The record's walkthrough id (an upload like any other).")
    url: str = Field(description="Its walkthrough page.")


class RefusedFile(Body):
    path: str = Field(description="Its path inside the archive, e.g. \"out/step-records/step-9.grpo-step.json\".")
    why: str = Field(description="Why it was left out (a step record's refusal names its JSON field).")


class RunUploadBody(Body):
    """A run opened from an archive: stored (201) or already stored (200)."""

    id: str = Field(description="The run's id: the first 16 hex digits of its trainer_state.json's sha256.")
    url: str = Field(description="The run explorer's page, e.g. \"/runs/0123456789abcdef\".")
    created: bool = Field(description="False when these exact bytes were already stored (the 200).")
    recorded: list[RecordedStep] = Field(description="Every recorded step linked to the run, this archive's and "
                                                     "earlier openings', by step.")
    refused: list[RefusedFile] = Field(description="Files of the archive left out; the run and the rest are "
                                                   "stored all the same.")


class RunRefusalBody(ErrorBody):
    """A refused archive: nothing was stored. `error` says it all in one line; `member` and `field` point at it."""

    member: str | None = optional_key("The path inside the archive the refusal is about (absent: the archive as a "
                                      "whole, e.g. not a zip or tar, cut short, or too large).")
    field: str | None = optional_key("Where in that member, as a JSON path (e.g. \"log_history[3].step\"), or the "
                                     "form field (\"archive\") a form without the file was missing.")


__all__ = ["RecordedStep", "RefusedFile", "RunRefusalBody", "RunUploadBody"]
