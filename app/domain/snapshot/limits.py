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

# -- values: every number and string must survive arithmetic, formatting and a round trip --
# Integers anywhere in a snapshot: what a JSON reader in a browser holds exactly
# (Number.MAX_SAFE_INTEGER). The exporter is such a reader, so it never writes more.
MAX_INT = 2**53 - 1
# A literal longer than this is refused before Python converts it: int() of thousands of
# digits raises ValueError (sys.get_int_max_str_digits) and costs quadratic time.
MAX_INT_DIGITS = 20

# -- geometry (docs/design.md §2): finite, and far wider than any drawing needs --------
# Node positions, world units (the seed spans 3,210). A member's position is relative
# to its module, so absolute coordinates may add up along a chain; still finite.
MAX_POSITION = 1e6
# Camera zoom z (screen = world * z + (x, y)); the seed uses 1.25.
MIN_ZOOM, MAX_ZOOM = 1e-3, 1e3
# Camera offsets x, y are screen pixels: enough to frame any allowed position at any
# allowed zoom (the seed's reach -2,065).
MAX_CAMERA_OFFSET = MAX_POSITION * MAX_ZOOM
# Viewport width and height, screen pixels: in (0, MAX_VIEWPORT] (the seed's is 1100 x 700).
MAX_VIEWPORT = 1e5


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


