"""What every response model shares, and the run-time type the JSON routes keep.

The models in this package document the bodies (OpenAPI); they are not in the
request path. Routes return the builders' dicts, serialised as they are, and
declare the model with `responses={200: {"model": ...}}`. The tests validate
real bodies against the models, and `extra="forbid"` makes any drift fail there.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema


class Body(BaseModel):
    """A JSON body, or part of one: every key it may hold is declared."""

    model_config = ConfigDict(extra="forbid")


def optional_key(description: str) -> Any:
    """A key that is absent or holds a value, never null: not required, no `default: null` in the schema."""
    return Field(None, description=description, json_schema_extra=lambda schema: schema.pop("default", None))


TensorValues = Annotated[float | list[Any], Field(
    description="A 0-d tensor's number, else nested lists of numbers, as deep as `shape` is long.")]

# A route's response_model at run time: the builder's dict, serialised as it is by
# FastAPI's JSON fast path (a top-level dict check, nothing else), exactly as a
# `-> dict` annotation does. Its schema is empty, so the 200 entry of the document
# is only the model declared in `responses` (with `-> dict` it would carry
# `type: object, additionalProperties: true` beside the model's $ref).
AsBuilt = Annotated[dict, WithJsonSchema({})]
AsBuiltList = Annotated[list[dict], WithJsonSchema({})]
