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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.domain.catalog import CatalogEntry
from app.domain.uploads import UploadRejected
from app.kinds.step_record.domain.opening import KIND_ID
from app.kinds.step_record.domain.run_dir import (
    NoRunLog,
    completion_files,
    find_step_records,
    find_trainer_state,
    run_root,
)
from app.kinds.step_record.domain.run_index import ReadIndex, fingerprint, step_keys
from app.kinds.step_record.domain.run_log import RunLog
from app.kinds.step_record.domain.run_store import RunStore
from app.kinds.step_record.domain.token_exports import find_token_exports
from app.kinds.step_record.domain.trl_completions import CompletionsRead, read_completions_dir
from app.kinds.step_record.domain.verl_rollouts import read_rollouts_dir, rollout_files
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
    rollouts: CompletionsRead | None = None  # verl's rollout_data_dir/{step}.jsonl read, when the directory has any

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


def _per_sample(root: Path, index: ReadIndex, name: str, files_of: Callable[[Path], list[Path]],
                read: Callable[[Path], CompletionsRead]) -> tuple[CompletionsRead, bool]:
    """As _tokens, for a per-sample source (TRL's completions tables, verl's rollout dumps)."""
    files = fingerprint(root, files_of(root))
    if not files:
        return CompletionsRead({}, 0, ()), False
    kept = index.get(root, name, files)
    if kept is not None:
        return CompletionsRead(step_keys(kept["metrics"]), int(kept["files"]), (), tuple(kept["lacks"])), True
    got = read(root)
    if not got.refused:
        index.put(root, name, files, {"metrics": got.metrics, "files": got.files, "lacks": list(got.lacks)})
    return got, False


@dataclass(frozen=True)
class _Read:
    tokens: TokenRun
    samples: CompletionsRead
    rollouts: CompletionsRead
    indexed: bool

    @property
    def metrics(self) -> dict[int, dict[str, float]]:
        return _joined(self.tokens.metrics, self.samples.metrics, self.rollouts.metrics)

    @property
    def files(self) -> int:
        return self.tokens.files + self.samples.files + self.rollouts.files

    @property
    def refused(self) -> list[tuple[str, str]]:
        return [*self.tokens.refused, *self.samples.refused, *self.rollouts.refused]


def _read_files(root: Path, index: ReadIndex) -> _Read:
    tokens, kept_tokens = _tokens(root, index)
    samples, kept_samples = _per_sample(root, index, "completions", completion_files, read_completions_dir)
    rollouts, kept_rollouts = _per_sample(root, index, "verl-rollouts", rollout_files, read_rollouts_dir)
    parts = ((tokens.files, kept_tokens), (samples.files, kept_samples), (rollouts.files, kept_rollouts))
    indexed = all(kept or not files for files, kept in parts) and any(files for files, _ in parts)
    return _Read(tokens, samples, rollouts, indexed)


def open_run_dir(path: Path, runs: RunStore, uploads: Uploads, index: ReadIndex | None = None) -> OpenedRun:
    """Store the run at `path` (an output directory, a checkpoint's, or a trainer_state.json) and the step records
    beside it. Raises NoRunLog / OSError for no state file, RunLogError or RunRefused when the run is refused.
    `index`: where what the readers made of the files is kept (default: the run store's index/ folder)."""
    index = index or ReadIndex(runs.root / "index")
    read: _Read | None = None
    try:
        state = find_trainer_state(path)
    except NoRunLog:
        if not path.is_dir():
            raise
        read = _read_files(path, index)
        if not read.files:
            raise
        if not read.metrics:  # every file refused: nothing to open, and the first refusal says why
            where, why = read.refused[0]
            raise NoRunLog(f"{path}: no trainer_state.json, and no per-token or per-sample file could be read: "
                           f"{where}: {why}") from None
        state, raw = path, as_trainer_state(read.metrics, _sources(read))
    else:
        raw = state.read_bytes()
    ident, created = runs.add(raw, str(state))
    root = path if read is not None else run_root(path, state)  # no log: the directory itself
    if read is None:
        read = _read_files(root, index)
        if read.metrics:
            runs.add_derived(ident, read.metrics)
    log = runs.get(ident)
    assert log is not None
    linked: list[LinkedRecord] = []
    refused: list[tuple[str, str]] = list(read.tokens.refused)  # the token reader names files in full already
    refused.extend((str(root / where), why) for where, why in (*read.samples.refused, *read.rollouts.refused))
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
                     read.tokens if read.tokens.files else None, read.samples if read.samples.files else None,
                     read.indexed, read.rollouts if read.rollouts.files else None)


def _joined(*parts: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
    """Per-step metrics of several readers as one map (tokens/… and samples/… never clash; TRL's tables and verl's
    dumps both write samples/…, but a run is one framework's)."""
    joined: dict[int, dict[str, float]] = {}
    for part in parts:
        for step, values in part.items():
            joined[step] = joined.get(step, {}) | values
    return dict(sorted(joined.items()))


def _sources(read: _Read) -> tuple[str, ...]:
    tables = ("TRL completions tables",) if read.samples.metrics else ()
    dumps = ("verl rollout dumps",) if read.rollouts.metrics else ()
    return (*(f"{source} per-token files" for source in read.tokens.sources), *tables, *dumps)


__all__ = ["LinkedRecord", "OpenedRun", "open_run_dir"]
