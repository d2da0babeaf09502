"""The tiny LM's route dependencies: its step's parameters from the query string."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query
from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from app.kinds.tiny_lm.engine.params import TokenParams
from app.views.param_fields import field_range

# The query-string face of TokenParams (the tiny-LM walkthrough's step): text as typed, so the
# engine's model checks every range and a refusal names TokenParams' bounds, not GRPOParams'.
TokenQueryModel = create_model(
    "TokenQuery", __config__=ConfigDict(extra="ignore"),
    **{name: (str | None, FieldInfo(default=None, description=f.description))
       for name, f in TokenParams.model_fields.items()},
)


async def token_params(query: Annotated[TokenQueryModel, Query()]) -> TokenParams:  # type: ignore[valid-type]
    try:
        return TokenParams(**query.model_dump(exclude_none=True))  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"]),
                                       "allowed": field_range(str(e["loc"][0]) if e["loc"] else "", TokenParams)}
                                      for e in exc.errors()]) from None


TokenParamsDep = Annotated[TokenParams, Depends(token_params)]
