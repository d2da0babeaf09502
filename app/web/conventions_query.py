"""The query-string face of a pydantic model of the engine (GRPOParams, Conventions): every field
optional (absent = the default), so OpenAPI documents each parameter and the engine's own model
validates it. Shared by the kinds' routes and the paths API."""
from __future__ import annotations

from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from app.engine.grpo.params import OPTIONAL_NUMBERS, Conventions


def query_field(name: str, field: FieldInfo):
    # `rewards` travels as one comma-separated string, not a repeated query key.
    # A preset's dual clip or clamp is turned off with "none" (engine.params.OFF).
    if name == "rewards":
        annotation = str | None
    elif name in OPTIONAL_NUMBERS:
        # a number or "none": passed on as typed, the engine's model checks the range
        return str | None, FieldInfo(default=None, description=field.description)
    else:
        annotation = field.annotation | None
    return annotation, FieldInfo.merge_field_infos(field, default=None)


ConventionsQuery = create_model(
    "ConventionsQuery", __config__=ConfigDict(extra="ignore"),
    **{name: query_field(name, f) for name, f in Conventions.model_fields.items()},
)


def conventions_from(given: dict, defaults: dict | None = None) -> Conventions:
    """Conventions(**defaults, **given), a refusal raised as the 422 that names the query parameter.
    `defaults` apply only when no preset is given (a preset brings its own values)."""
    values = given if "preset" in given else {**(defaults or {}), **given}
    try:
        return Conventions(**values)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]) from None
