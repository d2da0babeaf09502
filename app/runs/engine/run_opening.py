"""Opening a run directory (issue 34): its trainer_state.json into the run store, each step record beside it
into the upload store (as an upload of that file would go: the same reader, refusals, quota and id), and the
run's map of recorded steps to those uploads.

One record at a time is read, so a directory of many large records never sits in memory at once. A record the
reader refuses, or a file that is no step record, is reported by its path and left out; the run and the other
records are stored all the same (the caller says so, and `python -m app open` exits 1).

The frameworks' per-token files beside it (engine/token_run.py: prime-rl's token_exports/, slime's train_data/, with
slime's rollout_data/ dumps giving the same steps' groups and rewards) become
per-step metrics of the run (`tokens/…`), kept beside the run's file. A directory with those and no
trainer_state.json is a run all the same: its stored file is those numbers in trainer_state.json's shape. What the
readers made of a directory's files is kept (domain/run_index.py): opened again with the same files, it reads none.

Two more kinds of run open with no trainer_state.json: UNIPO's canonical files (domain/unipo_run.py: a file, or a
directory holding such *.json files; every entry's metrics are the run's log, each entry holding prompts one step
record), and a directory of step records alone (the verl snippet's records/, the recorder's step-records/, or the
records themselves), whose log is the records' own metrics at their steps. `OpenedRun.origin` says which. A UNIPO
run is indexed too: its metrics, and the upload id of each step record it linked, so a 1 GB file opened again reads
no entry (while those uploads are still stored).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.runs.domain.run_dir import (
    STATE,
    NoRunLog,
    completion_files,
    find_step_records,
    find_trainer_state,
    find_training_args,
    nothing_to_open,
    run_root,
)
from app.runs.domain.run_index import ReadIndex, fingerprint, step_keys
from app.runs.domain.run_store import RunStore
from app.runs.domain.slime_samples import rollout_dump_files
from app.runs.domain.token_exports import find_token_exports
from app.runs.domain.training_args import MAX_FILE, TrainingArgsRefused, read_training_args
from app.runs.domain.trl_completions import CompletionsRead, read_completions_dir
from app.runs.domain.unipo_run import is_unipo_file, unipo_files
from app.runs.domain.verl_rollouts import read_rollouts_dir, rollout_files
from app.runs.engine.opened_run import OpenedRun, UnipoRead, joined, opened_run
from app.runs.engine.record_linking import (
    LinkedRecord,
    OnRecord,
    Uploads,
    record_metrics,
    store_record_files,
)
from app.runs.engine.token_run import TokenRun, as_trainer_state, read_token_run
from app.runs.engine.unipo_opening import UNIPO_INDEX, open_unipo

RECORDS_ORIGIN = "the step records' own metrics (what the framework logged at each recorded step, as each record " \
                 "carries it)"


# The index entry's name for the per-token readers' numbers: bumped whenever they compute more, so a directory
# indexed by an older reader is read again (2: the IS correction's effect on the gradient, engine/is_effect.py;
# 3: slime's per-rank train dumps and its rollout dumps, engine/slime_ranks.py and slime_rollouts.py).
TOKENS_INDEX = "tokens-3"


def _tokens(root: Path, index: ReadIndex) -> tuple[TokenRun, bool]:
    """The per-token files' numbers: the index's when they have not changed, else read (and indexed when no file
    was refused). True when they came from the index."""
    files = fingerprint(root, [*(e.path for e in find_token_exports(root)), *(p for _, p in rollout_dump_files(root))])
    if not files:
        return TokenRun({}, (), 0, ()), False
    kept = index.get(root, TOKENS_INDEX, files)
    if kept is not None:
        return TokenRun(step_keys(kept["metrics"]), tuple(kept["sources"]), int(kept["files"]), (),
                        int(kept.get("rollout_files", 0))), True
    run = read_token_run(root)
    if not run.refused:  # a refusal is read again each time: the file may be fixed, or be readable, the next time
        index.put(root, TOKENS_INDEX, files, {"metrics": run.metrics, "sources": list(run.sources), "files": run.files,
                                                "rollout_files": run.rollout_files})
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
        return joined(self.tokens.metrics, self.samples.metrics, self.rollouts.metrics)

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


def open_run_dir(path: Path, runs: RunStore, uploads: Uploads, index: ReadIndex | None = None,
                 on_record: OnRecord | None = None) -> OpenedRun:
    """Store the run at `path` (an output directory, a checkpoint's, or a trainer_state.json) and the step records
    beside it. Raises NoRunLog / OSError for no state file, RunLogError or RunRefused when the run is refused.
    `index`: where what the readers made of the files is kept (default: the run store's index/ folder).
    `on_record`: told of each step record as it is stored, whole (a UNIPO run's are kept without their payload)."""
    index = index or ReadIndex(runs.root / "index")
    if path.is_file() and path.name != STATE and is_unipo_file(path):
        return open_unipo(path, (path,), runs, uploads, index, on_record)
    read: _Read | None = None
    try:
        state = find_trainer_state(path)
    except NoRunLog:
        if not path.is_dir():
            raise
        if unipo := unipo_files(path):
            return open_unipo(path, unipo, runs, uploads, index, on_record)
        read = _read_files(path, index)
        if not read.files:
            if records := find_step_records(path, alone=True):
                return _open_records_alone(path, records, runs, uploads, on_record)
            raise NoRunLog(nothing_to_open(path)) from None
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
    refused: list[tuple[str, str]] = list(read.tokens.refused)  # the token reader names files in full already
    refused.extend((str(root / where), why) for where, why in (*read.samples.refused, *read.rollouts.refused))
    if (args := find_training_args(root, state)) is not None:
        refused.extend(_keep_training_args(args, ident, runs))
    linked, refused_records = store_record_files(find_step_records(root), uploads, on_record)
    refused.extend(refused_records)
    recorded = runs.link_records(ident, {r.step: r.entry.id for r in linked}) if linked else runs.recorded(ident)
    return OpenedRun(ident, created, str(state), log, tuple(linked), recorded, tuple(refused),
                     read.tokens if read.tokens.files else None, read.samples if read.samples.files else None,
                     read.indexed, read.rollouts if read.rollouts.files else None)


def _keep_training_args(path: Path, ident: str, runs: RunStore) -> list[tuple[str, str]]:
    """A TRL run's only config, its pickled GRPOConfig, read as plain fields (never unpickled as it is) and kept with
    the run, so compare can say what differs between runs that recorded no step. [(path, why)] when refused."""
    try:
        if path.stat().st_size > MAX_FILE:
            raise TrainingArgsRefused(f"{path.stat().st_size:,} bytes: a GRPOConfig saves to about 10 KB, at most "
                                      f"{MAX_FILE:,} read")
        args = read_training_args(path.read_bytes())
    except (TrainingArgsRefused, OSError) as exc:
        return [(str(path), f"not read as a training config: {exc}")]
    runs.set_config(ident, {"class": args.class_name, "file": path.name, "fields": args.fields})
    return []


def _open_records_alone(path: Path, records: tuple[Path, ...], runs: RunStore, uploads: Uploads,
                        on_record: OnRecord | None) -> OpenedRun:
    """A directory of step records and nothing else: each stored, and their own metrics (what the framework logged
    at each recorded step) the run's log. A step recorded twice keeps its last record's (name order), as its link."""
    linked, refused = store_record_files(records, uploads, on_record)
    if not linked:
        where, why = refused[0]
        raise NoRunLog(f"{path}: no step record here could be read ({len(refused)} refused): {where}: {why}")
    metrics = {r.step: record_metrics(r.entry) for r in sorted(linked, key=lambda r: (r.step, r.path))}
    ident, created = runs.add(as_trainer_state(metrics, (RECORDS_ORIGIN,)), str(path))
    return opened_run(ident, created, path, runs, linked, refused, RECORDS_ORIGIN)


def _sources(read: _Read) -> tuple[str, ...]:
    tables = ("TRL completions tables",) if read.samples.metrics else ()
    dumps = ("verl rollout dumps",) if read.rollouts.metrics else ()
    return (*(f"{source} per-token files" for source in read.tokens.sources), *tables, *dumps)


__all__ = ["UNIPO_INDEX", "LinkedRecord", "OpenedRun", "UnipoRead", "open_run_dir"]
