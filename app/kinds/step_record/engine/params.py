"""A record's own conventions as the shared engine's `Conventions` (docs/reference/step-record.md, `config`).

The record names its conventions in the app's own words, so this is a copy, field by field; what
the engine does not have is refused here, never silently dropped.
"""
from __future__ import annotations

from app.engine.grpo.params import Conventions
from app.kinds.step_record.domain.record import StepRecord

# Record config fields that are not conventions: how the framework divided or accumulated its loss
NOT_CONVENTIONS = {"token_normalizer", "gradient_accumulation_steps"}


def record_conventions(record: StepRecord) -> Conventions:
    config = record.config.model_dump()
    values = {k: v for k, v in config.items() if k not in NOT_CONVENTIONS}
    unknown = set(values) - set(Conventions.model_fields)
    if unknown:
        raise ValueError(f"the engine has no convention named {sorted(unknown)}")
    # every field given explicitly: the preset only names where the defaults came from
    return Conventions(preset="trl", **values)
