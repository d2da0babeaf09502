"""Where in a document a problem is, as people read it: `collaboration.walkthrough.steps[2].view`.

Every refusal of a snapshot or of processes.toml names its field this way.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def render_loc(loc: Iterable[int | str]) -> str:
    """pydantic's loc tuple as a path; "" for the document itself.

    Keys that are not identifiers (node ids such as 'python@ratio#0') are quoted, so they
    cannot read as path syntax; one at the top level follows a "$" (`$["a b"]`, `$[0]`).
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"{'' if out else '$'}[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"{'' if out else '$'}[{json.dumps(part)}]"
    return out
