"""Opening a step record as a walkthrough: its graph is the GRPO head's, exported once from
engine/head_model.py (graph/step_record_head.tensorviz.json, `make`-free: a test re-exports it
and compares), with the recorded model's name and the run written in.

The graph is a `tensorviz.graph` snapshot like any other, so the house draws, lays out and links it
as it does every walkthrough; the record itself travels beside it as the catalog entry's payload.
"""
from __future__ import annotations

import copy
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from app.domain.catalog import Reader
from app.domain.snapshot import Snapshot, SnapshotError, parse_snapshot
from app.domain.uploads import MB
from app.kinds.step_record.domain.kind_id import KIND_ID
from app.kinds.step_record.domain.parsing import RecordError, parse_record
from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.domain.unipo import is_unipo

HEAD = Path(__file__).resolve().parents[1] / "graph" / "step_record_head.tensorviz.json"
# A G 16 x 4,096-token step is 2.6-5 MB (docs/reference/step-record.md); the largest file this app's
# uploads take, so the transport's cap (KindRegistry.upload_limit) follows it.
MAX_RECORD_BYTES = 32 * MB


@cache
def _head() -> dict[str, Any]:
    return json.loads(HEAD.read_text(encoding="utf-8"))


def run_title(record: StepRecord) -> str:
    run = record.run
    who = f"{run.framework} {run.framework_version}".strip()
    return f"{run.model}, step {run.step} ({who})"


def record_graph(record: StepRecord, digest: str) -> Snapshot:
    doc = copy.deepcopy(_head())
    doc["document"]["semantic"]["name"] = record.run.model
    doc["snapshotId"] = f"record-{digest}"
    walkthrough = doc["collaboration"]["walkthrough"]
    walkthrough["title"] = f"Your GRPO step: {run_title(record)}"
    return parse_snapshot(doc, source="<record graph>")


def opens(data: Any) -> bool:
    return isinstance(data, dict) and (data.get("format") == "grpo.step-record" or is_unipo(data))


def open_record(data: Any, source: str) -> tuple[Snapshot, StepRecord]:
    """(graph, record), or SnapshotError naming the record's field by path (the house's refusal)."""
    try:
        record = parse_record(data, source)
    except RecordError as exc:
        raise SnapshotError(exc.source, exc.path, exc.message, exc.errors) from None
    digest = hashlib.sha256(json.dumps([record.run.model_dump(), record.token_count, len(record.groups)],
                                       sort_keys=True).encode()).hexdigest()[:16]
    return record_graph(record, digest), record


READER = Reader(kind=KIND_ID, title="GRPO step record", max_bytes=MAX_RECORD_BYTES, opens=opens, open=open_record)
