"""Opening a run directory (issue 34): its trainer_state.json into the run store, each step record beside it
into the upload store (as an upload of that file would go: the same reader, refusals, quota and id), and the
run's map of recorded steps to those uploads.

One record at a time is read, so a directory of many large records never sits in memory at once. A record the
reader refuses, or a file that is no step record, is reported by its path and left out; the run and the other
records are stored all the same (the caller says so, and `python -m app open` exits 1).

The frameworks' per-token files beside it (engine/token_run.py: prime-rl's token_exports/, slime's train_data/) become
per-step metrics of the run (`tokens/…`), kept beside the run's file. A directory with those and no
trainer_state.json is a run all the same: its stored file is those numbers in trainer_state.json's shape. What the
readers made of a directory's files is kept (domain/run_index.py): opened again with the same files, it reads none.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.domain.catalog import CatalogEntry
from app.domain.uploads import UploadRejected
from app.kinds.step_record.domain.opening import KIND_ID
from app.kinds.step_record.domain.run_dir import NoRunLog, find_step_records, find_trainer_state, run_root
from app.kinds.step_record.domain.run_index import ReadIndex, fingerprint, step_keys
from app.kinds.step_record.domain.run_log import RunLog
from app.kinds.step_record.domain.run_store import RunStore
from app.kinds.step_record.domain.token_exports import find_token_exports
from app.kinds.step_record.domain.trl_completions import CompletionsRead, completion_files, read_completions_dir
from app.kinds.step_record.engine.token_run import TokenRun, as_trainer_state, read_token_run


class Uploads(Protocol):
    def add(self, raw: bytes, filename: str = ...) -> tuple[CatalogEntry, bool]: ...


@dataclass(frozen=True)
class LinkedRecord:
    step: int
    path: str
    entry: CatalogEntry
    created: bool


@dataclass(frozen=True)
class OpenedRun:
    id: str
    created: bool
    state_path: str
    log: RunLog
    records: tuple[LinkedRecord, ...]  # this opening's, in step order
    recorded: dict[int, str]  # the run's whole map: step -> walkthrough id
    refused: tuple[tuple[str, str], ...]  # (path, why)
    tokens: TokenRun | None = None  # the per-token files read, when the directory has any
    completions: CompletionsRead | None = None  # TRL's completions/*.parquet read, when the directory has any
    indexed: bool = False  # the per-token and per-sample numbers came from the index: no file of theirs was read

    @property
    def unlogged(self) -> tuple[int, ...]:
        """Recorded steps the trainer logged no metrics at (a record of a step the log ends before, say)."""
        logged = set(self.log.steps)
        return tuple(s for s in self.recorded if s not in logged)


def _step_of(entry: CatalogEntry) -> int | None:
    payload: Any = entry.payload
    if entry.kind != KIND_ID or payload is None:
        return None
    return int(payload.run.step)


def _tokens(root: Path, index: ReadIndex) -> tuple[TokenRun, bool]:
    """The per-token files' numbers: the index's when they have not changed, else read (and indexed when no file
    was refused). True when they came from the index."""
    files = fingerprint(root, (e.path for e in find_token_exports(root)))
    if not files:
        return TokenRun({}, (), 0, ()), False
    kept = index.get(root, "tokens", files)
    if kept is not None:
        return TokenRun(step_keys(kept["metrics"]), tuple(kept["sources"]), int(kept["files"]), ()), True
    run = read_token_run(root)
    if not run.refused:  # a refusal is read again each time: the file may be fixed, or be readable, the next time
        index.put(root, "tokens", files, {"metrics": run.metrics, "sources": list(run.sources), "files": run.files})
    return run, False


def _samples(root: Path, index: ReadIndex) -> tuple[CompletionsRead, bool]:
    """As _tokens, for TRL's completions tables."""
    files = fingerprint(root, completion_files(root))
    if not files:
        return CompletionsRead({}, 0, ()), False
    kept = index.get(root, "completions", files)
    if kept is not None:
        return CompletionsRead(step_keys(kept["metrics"]), int(kept["files"]), ()), True
    read = read_completions_dir(root)
    if not read.refused:
        index.put(root, "completions", files, {"metrics": read.metrics, "files": read.files})
    return read, False


def _read_files(root: Path, index: ReadIndex) -> tuple[TokenRun, CompletionsRead, bool]:
    (tokens, kept_tokens), (samples, kept_samples) = _tokens(root, index), _samples(root, index)
    indexed = (kept_tokens or not tokens.files) and (kept_samples or not samples.files) and \
        bool(tokens.files or samples.files)
    return tokens, samples, indexed


def open_run_dir(path: Path, runs: RunStore, uploads: Uploads, index: ReadIndex | None = None) -> OpenedRun:
    """Store the run at `path` (an output directory, a checkpoint's, or a trainer_state.json) and the step records
    beside it. Raises NoRunLog / OSError for no state file, RunLogError or RunRefused when the run is refused.
    `index`: where what the readers made of the files is kept (default: the run store's index/ folder)."""
    index = index or ReadIndex(runs.root / "index")
    tokens: TokenRun | None = None
    samples: CompletionsRead | None = None
    indexed = False
    try:
        state = find_trainer_state(path)
    except NoRunLog:
        if not path.is_dir():
            raise
        tokens, samples, indexed = _read_files(path, index)
        if not tokens.files and not samples.files:
            raise
        derived = _joined(tokens.metrics, samples.metrics)
        if not derived:  # every file refused: nothing to open, and the first refusal says why
            where, why = (tokens.refused or samples.refused)[0]
            raise NoRunLog(f"{path}: no trainer_state.json, and no per-token or per-sample file could be read: "
                           f"{where}: {why}") from None
        state, raw = path, as_trainer_state(derived, _sources(tokens, samples))
    else:
        raw = state.read_bytes()
    ident, created = runs.add(raw, str(state))
    root = path if tokens is not None else run_root(path, state)  # no log: the directory itself
    if tokens is None or samples is None:
        tokens, samples, indexed = _read_files(root, index)
        derived = _joined(tokens.metrics, samples.metrics)
        if derived:
            runs.add_derived(ident, derived)
    log = runs.get(ident)
    assert log is not None
    linked: list[LinkedRecord] = []
    refused: list[tuple[str, str]] = []
    refused.extend(tokens.refused)
    refused.extend((str(root / where), why) for where, why in samples.refused)
    for record_path in find_step_records(root):
        try:
            entry, stored = uploads.add(record_path.read_bytes(), record_path.name)
        except UploadRejected as exc:
            refused.append((str(record_path), f"refused ({exc.status}): {exc}"))
            continue
        except OSError as exc:
            refused.append((str(record_path), f"cannot be read: {exc.strerror or exc}"))
            continue
        step = _step_of(entry)
        if step is None:
            refused.append((str(record_path), "not a GRPO step record (stored as an upload, not linked to the run)"))
            continue
        linked.append(LinkedRecord(step, str(record_path), entry, stored))
    linked.sort(key=lambda r: r.step)
    recorded = runs.link_records(ident, {r.step: r.entry.id for r in linked}) if linked else runs.recorded(ident)
    return OpenedRun(ident, created, str(state), log, tuple(linked), recorded, tuple(refused),
                     tokens if tokens.files else None, samples if samples.files else None, indexed)


def _joined(*parts: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
    """Per-step metrics of several readers as one map (their names never clash: tokens/… and samples/…)."""
    joined: dict[int, dict[str, float]] = {}
    for part in parts:
        for step, values in part.items():
            joined[step] = joined.get(step, {}) | values
    return dict(sorted(joined.items()))


def _sources(tokens: TokenRun, samples: CompletionsRead) -> tuple[str, ...]:
    tables = ("TRL completions tables",) if samples.metrics else ()
    return (*(f"{source} per-token files" for source in tokens.sources), *tables)


__all__ = ["LinkedRecord", "OpenedRun", "open_run_dir"]
