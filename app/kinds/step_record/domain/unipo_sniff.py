"""Whether parsed JSON is a UNIPO canonical file (unipo.py converts it); asked before a record is
parsed, so it must be cheap and never raise."""
from __future__ import annotations

from typing import Any


def is_unipo(data: Any) -> bool:
    try:
        from app.kinds.step_record.domain.unipo import is_unipo as real
    except ImportError:  # the reader is not there: no file is UNIPO's
        return False
    return real(data)
