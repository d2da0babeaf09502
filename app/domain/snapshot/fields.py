"""Field-level rules of the snapshot model: bounded numbers, linkable ids, JSON inside strings.

Each is a pydantic annotation or validator used by models.py; every refusal becomes a 422
that names the field by its JSON path.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, FiniteFloat

from app.domain.json_path import render_loc
from app.domain.snapshot.limits import (
    MAX_CAMERA_OFFSET,
    MAX_DEPTH,
    MAX_POSITION,
    MAX_VIEWPORT,
    MAX_ZOOM,
    MIN_ZOOM,
    text_depth,
)
from app.domain.snapshot.values import loads, value_problems


def one_of(what: str, value: Any, allowed: Any) -> Any:
    if value not in allowed:
        shown = ", ".join(map(str, sorted(allowed)))
        raise ValueError(f"unsupported {what} {value!r} (supported: {shown})")
    return value


def loads_if_str(value: Any) -> Any:
    # The exporter nests JSON documents inside JSON strings (anchor contexts).
    if not isinstance(value, str):
        return value
    if text_depth(value) > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        decoded = loads(value)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError
        raise ValueError(f"not valid JSON ({exc})") from None
    for loc, why in value_problems(decoded, limit=1):
        raise ValueError(f"in this JSON string, at {render_loc(loc) or '$'}: {why}")
    return decoded


def _within(low: float, high: float, unit: str, *, low_open: bool = False) -> AfterValidator:
    """A float bounded by limits.py, refused with the range it missed."""
    shown = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def check(value: float) -> float:
        if value > high or value < low or (low_open and value == low):
            raise ValueError(f"{value:g} is outside {shown} {unit}")
        return value
    return AfterValidator(check)


Coordinate = Annotated[FiniteFloat, _within(-MAX_POSITION, MAX_POSITION, "world units")]
Offset = Annotated[FiniteFloat, _within(-MAX_CAMERA_OFFSET, MAX_CAMERA_OFFSET, "screen pixels")]
Zoom = Annotated[FiniteFloat, _within(MIN_ZOOM, MAX_ZOOM, "(camera zoom)")]
Extent = Annotated[FiniteFloat, _within(0, MAX_VIEWPORT, "screen pixels", low_open=True)]

# Browsers resolve "." and ".." path segments, even spelled %2E, before any request is
# sent, so no encoding carries them: /walkthroughs/x/steps/.. arrives as /walkthroughs/x,
# which redirects to the opening step again. Every other id works, percent-encoded by
# app/views/urls.py (and "" has no segment at all), so exactly these are refused.
UNLINKABLE_IDS = ("", ".", "..")


def linkable(value: str) -> str:
    if value in UNLINKABLE_IDS:
        raise ValueError(f"id {value!r} cannot be a URL path segment (browsers resolve "
                         "'.' and '..' away); give the step another id")
    return value
