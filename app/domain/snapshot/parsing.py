"""Reading an export: JSON text -> validated Snapshot, or one SnapshotError naming the field."""
from __future__ import annotations

import pathlib
from typing import Any

from pydantic import ValidationError

from app.domain.json_path import render_loc
from app.domain.snapshot.limits import MAX_DEPTH, MAX_ITEMS, text_depth, value_depth
from app.domain.snapshot.models import Snapshot
from app.domain.snapshot.references import cross_reference_problems
from app.domain.snapshot.values import loads, value_problems

MAX_REPORTED = 100  # a file of a million bad numbers gets a readable refusal, not a huge one


class SnapshotError(ValueError):
    """A refused snapshot; ``path`` is the JSON path of the first problem."""

    def __init__(self, source: str, path: str, message: str,
                 errors: list[tuple[str, str]] | None = None) -> None:
        self.source, self.path, self.message = source, path, message
        self.errors = errors if errors else [(path, message)]
        super().__init__(f"{source}: {path}: {message}")



def _flatten(exc: ValidationError) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, Exception):
            # Our own validators' messages, without pydantic's "Value error, ".
            found.append(((render_loc(err["loc"]) or "$"), str(cause)))
        else:
            found.append(((render_loc(err["loc"]) or "$"), err["msg"]))
    return found


def parse_snapshot(raw: bytes | str | dict, source: str = "<upload>") -> Snapshot:
    """Parse and validate an export; raises only SnapshotError."""
    if isinstance(raw, dict):
        data: Any = raw
        if value_depth(data) > MAX_DEPTH:
            raise SnapshotError(source, "$", f"nesting deeper than {MAX_DEPTH} levels")
    else:
        if text_depth(raw) > MAX_DEPTH:
            raise SnapshotError(source, "$", f"nesting deeper than {MAX_DEPTH} levels")
        try:
            data = loads(raw)
        except RecursionError:
            raise SnapshotError(source, "$", "JSON nested too deeply") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise SnapshotError(source, "$", f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(data), "a number")
        raise SnapshotError(source, "$", f"top level must be a JSON object, not {kind}")
    bad = [(render_loc(loc) or "$", why) for loc, why in value_problems(data, limit=MAX_REPORTED)]
    if bad:
        raise SnapshotError(source, *bad[0], errors=bad)
    for keys, limit in MAX_ITEMS.items():
        items: Any = data
        for key in keys:
            items = items.get(key) if isinstance(items, dict) else None
        if isinstance(items, list) and len(items) > limit:
            raise SnapshotError(source, ".".join(keys), f"{len(items)} items exceed the limit of {limit}")
    try:
        snapshot = Snapshot.model_validate(data)
    except ValidationError as exc:
        errors = _flatten(exc)
        raise SnapshotError(source, *errors[0], errors=errors) from None
    problems = cross_reference_problems(snapshot)  # once every field parsed: ids that name nothing, or contradict
    if problems:
        raise SnapshotError(source, *problems[0], errors=problems)
    return snapshot


def load_snapshot(path: pathlib.Path) -> Snapshot:
    """Read one export file; OSError propagates, bad content is SnapshotError."""
    return parse_snapshot(pathlib.Path(path).read_bytes(), source=pathlib.Path(path).name)

