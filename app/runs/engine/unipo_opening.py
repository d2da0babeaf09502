"""A run of UNIPO canonical files (domain/unipo_run.py: a file, or a directory holding such *.json files): every
entry's metrics its log, each entry holding prompts a step record in the upload store, linked to its step. What the
opening made of the files (the joined metrics and each linked record's upload id) is kept in the read index, so a
1 GB file opened again reads no entry while those uploads are still stored."""
from __future__ import annotations

from pathlib import Path

from app.domain.catalog import CatalogEntry
from app.kinds.step_record.domain.kind_id import KIND_ID
from app.runs.domain.run_dir import NoRunLog
from app.runs.domain.run_index import Fingerprint, ReadIndex, fingerprint, step_keys
from app.runs.domain.run_log import RunLogError
from app.runs.domain.run_store import RunStore
from app.runs.domain.unipo_run import RENAMED, UnipoRun, read_unipo_run
from app.runs.engine.opened_run import OpenedRun, UnipoRead, joined, opened_run
from app.runs.engine.record_linking import LinkedRecord, OnRecord, Uploads, store_unipo_records
from app.runs.engine.token_run import as_trainer_state

# The index entry's name for what a UNIPO run's opening made of its files: bumped whenever it keeps more or other.
UNIPO_INDEX = "unipo-1"


def open_unipo(path: Path, files: tuple[Path, ...], runs: RunStore, uploads: Uploads, index: ReadIndex,
                on_record: OnRecord | None) -> OpenedRun:
    """A run of UNIPO canonical files (one given, or a directory's): the index's when every file and every linked
    upload is as the opening that kept it left them, else read (and kept when nothing was refused)."""
    seen = _unipo_fingerprint(path, files)
    if seen is not None and (kept := index.get(path, UNIPO_INDEX, seen)) is not None:
        opened = _unipo_from_index(path, kept, runs, uploads)
        if opened is not None:
            return opened
    opened, metrics = _read_unipo(path, files, runs, uploads, on_record)
    if seen is not None and not opened.refused:  # a refusal is said again at every opening, never kept
        index.put(path, UNIPO_INDEX, seen, _unipo_entry(path, opened, metrics))
    return opened


def _unipo_base(path: Path) -> Path:
    """The folder the index names a UNIPO run's files from: the directory opened, or the one file's."""
    return path if path.is_dir() else path.parent


def _unipo_fingerprint(path: Path, files: tuple[Path, ...]) -> Fingerprint | None:
    try:
        return fingerprint(_unipo_base(path), files)
    except (OSError, ValueError):  # a file gone since it was listed: the reader says so, and nothing is kept
        return None


def _unipo_entry(path: Path, opened: OpenedRun, metrics: dict[int, dict[str, float]]) -> dict:
    """The index's value: the joined metrics, the origin, each file's counts and each linked record's upload id,
    by where it is in its file (no entry's arrays: a few numbers per logged step)."""
    base = _unipo_base(path)
    return {"origin": opened.origin,
            "metrics": {str(step): values for step, values in metrics.items()},
            "files": {str(u.path.relative_to(base)): {"entries": u.entries, "records": u.records,
                                                      "blueprint": u.blueprint,
                                                      "renamed": {n: RENAMED + n for n in u.renamed}}
                      for u in opened.unipo},
            "linked": {Path(r.path).name: {"step": r.step, "upload": r.entry.id} for r in opened.records}}


def _unipo_from_index(path: Path, kept: dict, runs: RunStore, uploads: Uploads) -> OpenedRun | None:
    """The run an earlier opening made of these very files, stored and linked again without reading them; None when
    an upload it linked is no longer stored (deleted since: the files are read again) or the entry is not whole."""
    try:
        metrics, origin = step_keys(kept["metrics"]), str(kept["origin"])
        linked = [(str(at), int(r["step"]), str(r["upload"])) for at, r in kept["linked"].items()]
        read = tuple(UnipoRead(_unipo_base(path) / name, int(f["entries"]), int(f["records"]), bool(f["blueprint"]),
                               tuple(f["renamed"].keys())) for name, f in kept["files"].items())
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if not metrics or not all(uploads.exists(upload) for _, _, upload in linked):
        return None
    ident, created = runs.add(as_trainer_state(metrics, (origin,)), str(path))
    base = _unipo_base(path)
    # Nothing was read: each record is its upload's id alone (no snapshot, no payload), as the opening linked it
    records = [LinkedRecord(step, str(base / at), CatalogEntry(upload, "upload", None, None, KIND_ID), False)
               for at, step, upload in linked]
    return opened_run(ident, created, path, runs, records, [], origin, read, indexed=True)


def _read_unipo(path: Path, files: tuple[Path, ...], runs: RunStore, uploads: Uploads,
                on_record: OnRecord | None) -> tuple[OpenedRun, dict[int, dict[str, float]]]:
    """A run of UNIPO canonical files: every entry's metrics its log (each file read whole first, so a file refused
    stores nothing), then each entry holding prompts stored as a step record and linked. A file refused leaves the
    others open; every file refused refuses the run (RunLogError, the first file's path and field). Returns the
    opened run and its joined metrics."""
    read: list[UnipoRun] = []
    refused: list[tuple[str, str]] = []
    errors: list[RunLogError] = []
    metrics: dict[int, dict[str, float]] = {}
    for file in files:
        try:
            run = read_unipo_run(file)
        except RunLogError as exc:
            errors.append(exc)
            refused.append((str(file), f"{exc.path}: {exc.message} (nothing of this file stored)"))
            continue
        except OSError as exc:
            refused.append((str(file), f"cannot be read: {exc.strerror or exc}"))
            continue
        if clash := _clash(metrics, run.metrics):
            refused.append((str(file), f"{clash} (nothing of this file stored)"))
            continue
        read.append(run)
        metrics = joined(metrics, run.metrics)
    if not read:
        if errors:
            raise errors[0]
        raise NoRunLog(f"{path}: no UNIPO canonical file could be read: {refused[0][0]}: {refused[0][1]}")
    names = ", ".join(r.path.name for r in read)
    origin = f"UNIPO canonical JSON ({names})"
    ident, created = runs.add(as_trainer_state(metrics, (origin,)), str(path))
    linked: list[LinkedRecord] = []
    for run in read:
        stored, refused_records = store_unipo_records(run, uploads, on_record)
        linked.extend(stored)
        refused.extend(refused_records)
    opened = opened_run(ident, created, path, runs, linked, refused, origin, tuple(UnipoRead.of(r) for r in read))
    return opened, metrics


def _clash(have: dict[int, dict[str, float]], more: dict[int, dict[str, float]]) -> str:
    """Two UNIPO files of one directory disagreeing on a metric at a step: they are not one run's."""
    for step, values in more.items():
        for name, value in values.items():
            if name in have.get(step, {}) and have[step][name] != value:
                return (f"step {step}: {name} = {value!r} disagrees with {have[step][name]!r} in an earlier file of "
                        "this directory")
    return ""



__all__ = ["UNIPO_INDEX", "open_unipo"]
