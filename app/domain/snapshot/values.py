"""JSON values a snapshot may hold: each must round-trip through Python, UTF-8 and a browser.

`json.loads` alone accepts `NaN` and `Infinity`, turns `1e999` into infinity, raises a bare
ValueError on an integer literal of thousands of digits, and decodes `"\\ud800"` into a lone
surrogate that no page can encode as UTF-8. Here such values are kept as markers while
parsing, then reported by their JSON path like any other refused field.
"""
from __future__ import annotations

import json
import math
from typing import Any

from app.domain.snapshot.limits import MAX_INT, MAX_INT_DIGITS

Loc = tuple[int | str, ...]


class _Refused:
    """A number literal that cannot stand as a value; the walk reports it with its path."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _Refused(f"an integer of {digits} digits (at most {MAX_INT:,} in magnitude)")
    return int(text)


def _float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"the number {text[:40]}{'...' if len(text) > 40 else ''} overflows a float")
    return value


def _constant(text: str) -> _Refused:
    return _Refused(f"{text} is not a JSON number")


def loads(text: str | bytes) -> Any:
    """json.loads that never raises ValueError for a number: odd ones become markers."""
    return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)


def _string_problem(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {ascii(text[exc.start])} at character {exc.start} (not valid Unicode)"
    return None


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, _Refused):
        return value.why
    if isinstance(value, str):
        return _string_problem(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"an integer beyond ±{MAX_INT:,}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    return None


def value_problems(value: Any, limit: int = 100) -> list[tuple[Loc, str]]:
    """(location, why) of the first ``limit`` numbers or strings, keys included, that would
    not round-trip, in document order.

    Recursive, one call per object or array: callers bound the depth first
    (limits.MAX_DEPTH). Locations are built only for problems, so a 2 MB upload walks in
    a fraction of the time its parsing takes."""
    found: list[tuple[Loc, str]] = []
    path: list[int | str] = []

    def visit(container: dict[Any, Any] | list[Any]) -> None:
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, child in items:
            if len(found) >= limit:
                return
            kind = type(child)
            # (isascii first: the common case costs no call)
            if isinstance(key, str) and not key.isascii() and (why := _string_problem(key)):
                found.append(((*path, key), f"key: {why}"))
                if kind is not dict and kind is not list:
                    continue
            if kind is dict or kind is list or isinstance(child, (dict, list)):
                path.append(key)
                visit(child)
                path.pop()
            elif kind is str:
                if not child.isascii() and (why := _string_problem(child)) is not None:
                    found.append(((*path, key), why))
            elif kind is float:
                if not math.isfinite(child):
                    found.append(((*path, key), f"{child} is not a finite number"))
            elif kind is int:
                if not -MAX_INT <= child <= MAX_INT:
                    found.append(((*path, key), f"an integer beyond ±{MAX_INT:,}"))
            elif child is not None and kind is not bool and (why := _scalar_problem(child)) is not None:
                found.append(((*path, key), why))

    if isinstance(value, (dict, list)):
        visit(value)
    elif (why := _scalar_problem(value)) is not None:
        found.append(((), why))
    return found[:limit]
