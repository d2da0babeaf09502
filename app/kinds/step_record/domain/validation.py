"""Validating the project's own record format: parsed JSON -> StepRecord, or one RecordError naming
the field by JSON path. Also the sniff the upload store asks first (`is_record`): a record says
`"format": "grpo.step-record"` at its top level. UNIPO's files are converted to this format first
(unipo.py); parsing.py chooses between the two.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from app.domain.json_path import render_loc
from app.kinds.step_record.domain.arrays import describe
from app.kinds.step_record.domain.record import FORMAT, StepRecord

MAX_REPORTED = 50
# pydantic's refusals of a value of the wrong JSON type (the models are strict: "0.5" is no number)
_TYPE_ERRORS = {"float_type", "int_type", "bool_type", "string_type", "dict_type", "list_type", "model_type"}


class RecordError(ValueError):
    """A refused record; `path` is the JSON path of the first problem, `errors` all of them."""

    def __init__(self, source: str, path: str, message: str, errors: list[tuple[str, str]] | None = None):
        self.source, self.path, self.message = source, path, message
        self.errors = errors or [(path, message)]
        super().__init__(f"{source}: {path}: {message}")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def load_json(raw: bytes | str, source: str) -> Any:
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise RecordError(source, "$", "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise RecordError(source, "$", f"not valid JSON ({exc})") from None


def is_record(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format") == FORMAT


def _flatten(exc: ValidationError) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False)[:MAX_REPORTED]:
        loc = render_loc(err["loc"]) or "$"
        message = str(cause) if isinstance(cause := (err.get("ctx") or {}).get("error"), Exception) else err["msg"]
        if err["type"] in _TYPE_ERRORS:  # strict types: say what came, since "0.5" reads like a number
            message = f"{message}, not {describe(err['input'])}"
        # a model validator's message starts with the field it names: join it to the path
        head, sep, rest = message.partition(": ")
        if sep and head.replace("_", "").replace("[", "").replace("]", "").replace(".", "").isalnum() \
                and " " not in head:
            loc = f"{loc}.{head}" if loc != "$" else head
            message = rest
        found.append((loc, message))
    return found


def validate_record(data: Any, source: str = "<record>") -> StepRecord:
    """Validate parsed JSON (or raw bytes) in the project's own format; raises only RecordError."""
    if isinstance(data, (bytes, str)):
        data = load_json(data, source)
    if not isinstance(data, dict):
        raise RecordError(source, "$", "top level must be a JSON object")
    try:
        return StepRecord.model_validate(data)
    except ValidationError as exc:
        errors = _flatten(exc)
        raise RecordError(source, *errors[0], errors=errors) from None
    except RecursionError:
        raise RecordError(source, "$", "nested too deeply") from None
