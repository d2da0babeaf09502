"""Reading a step record: bytes or parsed JSON -> StepRecord, or one RecordError naming the field by
JSON path. The project's own format is validated as it is (validation.py); UNIPO's canonical files
are recognised by their own keys and converted first (unipo.py), so both refuse by the same paths.
"""
from __future__ import annotations

from typing import Any

from app.kinds.step_record.domain import unipo
from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.domain.validation import RecordError, is_record, load_json, validate_record

__all__ = ["RecordError", "is_record", "load_json", "parse_record"]


def parse_record(data: Any, source: str = "<record>") -> StepRecord:
    """Validate parsed JSON (or raw bytes) as a step record; raises only RecordError."""
    if isinstance(data, (bytes, str)):
        data = load_json(data, source)
    if isinstance(data, dict) and unipo.is_unipo(data):  # converted, and refused by UNIPO's own paths
        return unipo.parse_unipo(data, source)
    return validate_record(data, source)
