"""What every kind's parameter form is made of: a field's label and help, and its allowed range
read from the pydantic model's own constraints (so a 422 and the form say the same)."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from app.views import numbers


@dataclass(frozen=True)
class FieldSpec:
    name: str
    label: str
    numeric: bool = True
    choices: tuple[str, ...] = ()  # a <select> of these values
    explain: str = ""  # one line under the field: what the choice changes
    labels: tuple[str, ...] = ()  # what each choice reads as, when not its value



def field_range(name: str, model: type[BaseModel]) -> str | None:
    """Human-readable bounds of a parameter of `model`, from its Field constraints."""
    field = model.model_fields.get(name)
    if field is None:
        return None
    low = high = None
    for c in field.metadata:
        for attr, sym in (("ge", "<="), ("gt", "<")):
            if getattr(c, attr, None) is not None:
                low = f"{numbers.bound(getattr(c, attr))} {sym} "
        for attr, sym in (("le", "<="), ("lt", "<")):
            if getattr(c, attr, None) is not None:
                high = f" {sym} {numbers.bound(getattr(c, attr))}"
    if low is None and high is None:
        return None
    return f"{low or ''}{name}{high or ''}"
