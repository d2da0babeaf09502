"""Size limits of a snapshot, checked without a recursive parser.

Anything a snapshot says is data; these bounds keep parsing and drawing it
bounded whatever the file holds.
"""
from __future__ import annotations

from typing import Any

MAX_DEPTH = 64  # no real export nests deeper; deeper input only feeds recursion
# A readable graph has far fewer; past these a page would be tens of MB of SVG.
MAX_ITEMS = {("document", "semantic", "nodes"): 10_000, ("document", "semantic", "edges"): 50_000,
             ("collaboration", "walkthrough", "steps"): 1_000}


def text_depth(text: str | bytes) -> int:
    """Deepest bracket nesting of JSON text, found without a recursive parser."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def value_depth(value: Any) -> int:
    """Deepest nesting of parsed JSON (iterative: a deep value cannot overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item)
    return deepest


