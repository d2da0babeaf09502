"""Opening a run directory (issue 34): its trainer_state.json into the run store, each step record beside it
into the upload store (as an upload of that file would go: the same reader, refusals, quota and id), and the
run's map of recorded steps to those uploads.

One record at a time is read, so a directory of many large records never sits in memory at once. A record the
reader refuses, or a file that is no step record, is reported by its path and left out; the run and the other
records are stored all the same (the caller says so, and `python -m app open` exits 1).

The frameworks' per-token files beside it (engine/token_run.py: prime-rl's token_exports/, slime's train_data/) become
per-step metrics of the run (`tokens/…`), kept beside the run's file. A directory with those and no
trainer_state.json is a run all the same: its stored file is those numbers in trainer_state.json's shape.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.domain.catalog import CatalogEntry
from app.domain.uploads import UploadRejected
from app.kinds.step_record.domain.opening import KIND_ID
from app.kinds.step_record.domain.run_dir import NoRunLog, find_step_records, find_trainer_state, run_root
from app.kinds.step_record.domain.run_log import RunLog
from app.kinds.step_record.domain.run_store import RunStore
from app.kinds.step_record.domain.trl_completions import CompletionsRead, read_completions_dir
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


def open_run_dir(path: Path, runs: RunStore, uploads: Uploads) -> OpenedRun:
    """Store the run at `path` (an output directory, a checkpoint's, or a trainer_state.json) and the step records
    beside it. Raises NoRunLog / OSError for no state file, RunLogError or RunRefused when the run is refused."""
    tokens: TokenRun | None = None
    samples: CompletionsRead | None = None
    try:
        state = find_trainer_state(path)
    except NoRunLog:
        if not path.is_dir():
            raise
        tokens, samples = read_token_run(path), read_completions_dir(path)
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
        tokens, samples = read_token_run(root), read_completions_dir(root)
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
                     tokens if tokens.files else None, samples if samples.files else None)


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
