"""A run's step records into the upload store, one at a time (issue 34): the recorder's files beside a run, or a
UNIPO file's entries, each stored as an upload of that file would be (the same reader, refusals, quota and id) and
returned with the step it is of, ready to be linked to the run. A record refused is named by its path and left
out; the others are stored all the same.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from app.domain.catalog import CatalogEntry
from app.domain.uploads import UploadRejected
from app.kinds.step_record.domain.kind_id import KIND_ID
from app.runs.domain.run_log import RunLogError
from app.runs.domain.unipo_run import UnipoRun, record_refusals, unipo_records


class Uploads(Protocol):
    def add(self, raw: bytes, filename: str = ...) -> tuple[CatalogEntry, bool]: ...
    def exists(self, ident: str) -> bool: ...  # a UNIPO run opened from the index links only uploads still stored


@dataclass(frozen=True)
class LinkedRecord:
    step: int
    path: str
    entry: CatalogEntry
    created: bool


def step_of(entry: CatalogEntry) -> int | None:
    payload: Any = entry.payload
    if entry.kind != KIND_ID or payload is None:
        return None
    return int(payload.run.step)


def record_metrics(entry: CatalogEntry) -> dict[str, float]:
    """The metrics the framework logged at the record's step, as the record carries them (null ones left out)."""
    payload: Any = entry.payload
    return {k: float(v) for k, v in payload.metrics.items() if v is not None}


OnRecord = Callable[[LinkedRecord], None]


def store_record_files(paths: Iterable, uploads: Uploads, on_record: OnRecord | None = None,
                       ) -> tuple[list[LinkedRecord], list[tuple[str, str]]]:
    """Each step record file into the upload store: (the stored ones, in step order; (path, why) of the others).
    `on_record` is told of each as it is stored."""
    linked: list[LinkedRecord] = []
    refused: list[tuple[str, str]] = []
    for record_path in paths:
        try:
            entry, stored = uploads.add(record_path.read_bytes(), record_path.name)
        except UploadRejected as exc:
            refused.append((str(record_path), f"refused ({exc.status}): {exc}"))
            continue
        except OSError as exc:
            refused.append((str(record_path), f"cannot be read: {exc.strerror or exc}"))
            continue
        step = step_of(entry)
        if step is None:
            refused.append((str(record_path), "not a GRPO step record (stored as an upload, not linked to the run)"))
            continue
        linked.append(LinkedRecord(step, str(record_path), entry, stored))
        if on_record is not None:
            on_record(linked[-1])
    linked.sort(key=lambda r: r.step)
    return linked, refused


def store_unipo_records(run: UnipoRun, uploads: Uploads, on_record: OnRecord | None = None,
                        ) -> tuple[list[LinkedRecord], list[tuple[str, str]]]:
    """Each entry of a UNIPO file that becomes a step record (domain/unipo_run.py) into the upload store. A refused
    one is said by the whole file's paths (read again for them: only a refusal pays for it); a refusal of the header
    or the blueprint, the same for every entry, is said once. A UNIPO file holds as many records as it has entries
    with prompts (hundreds in a 1 GB file), so each is kept without what the reader read (`payload`, tens of MB of
    arrays for a 5 MB entry): `on_record` sees it whole as it is stored (the command prints its checks then)."""
    linked: list[LinkedRecord] = []
    refused: list[tuple[str, str]] = []
    said: set[tuple[str, str]] = set()
    where = str(run.path)
    try:
        for record in unipo_records(run):
            try:
                entry, stored = uploads.add(record.raw, record.filename)
            except UploadRejected as exc:
                why = record_refusals(record) if exc.status == 422 else ()
                if not why:
                    refused.append((where, f"entries[{record.index}] (step {record.step}): refused ({exc.status}): "
                                           f"{exc}"))
                for path, message in why:
                    if path.startswith("entries["):
                        refused.append((where, f"{path}: {message} (step {record.step} not linked; its metrics are "
                                               "in the run)"))
                    elif (path, message) not in said:
                        said.add((path, message))
                        refused.append((where, f"{path}: {message} (no entry's step record can be made)"))
                continue
            whole = LinkedRecord(record.step, f"{where} entries[{record.index}]", entry, stored)
            if on_record is not None:
                on_record(whole)
            linked.append(replace(whole, entry=replace(entry, payload=None)))
            del whole, entry
    except RunLogError as exc:
        refused.append((where, f"{exc.path}: {exc.message}"))
    except OSError as exc:
        refused.append((where, f"cannot be read: {exc.strerror or exc} (its step records left out)"))
    linked.sort(key=lambda r: r.step)
    return linked, refused


__all__ = ["LinkedRecord", "OnRecord", "Uploads", "record_metrics", "step_of", "store_record_files",
           "store_unipo_records"]
