"""Recomputed steps, kept per (record, conventions) so paging through a 65,536-token step's
windows does not recompute it for every page. Bounded by count: one result of a G 16 x 4,096 step
holds about 15 MB of arrays. Per process (each compute worker keeps its own). Not
`cached_computation` (engine/runtime/compute.py): its key is the arguments, and a record (numpy
arrays) is not hashable; the record's catalog id is the key here, and misses take a slot the same way."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict

from app.engine.grpo.params import Conventions
from app.engine.runtime.compute import compute_slot
from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.step import Recomputed, recompute

LIMIT = 6
_cache: OrderedDict[tuple[str, str], Recomputed] = OrderedDict()
_lock = threading.Lock()


def recomputed(key: str, record: StepRecord, conventions: Conventions | None = None) -> Recomputed:
    """The step under `conventions` (None: the record's own); `key` names the record (its catalog id)."""
    slot = (key, "" if conventions is None else json.dumps(conventions.model_dump(), sort_keys=True))
    with _lock:
        hit = _cache.get(slot)
        if hit is not None:
            _cache.move_to_end(slot)
            return hit
    with compute_slot():  # a miss computes: it takes one of the app's compute slots, as every kind's does
        result = recompute(record, conventions)
    with _lock:
        _cache[slot] = result
        while len(_cache) > LIMIT:
            _cache.popitem(last=False)
    return result
