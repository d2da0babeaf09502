"""What the run store holds (`python -m app runs list`): each run's id, where it was opened from, what its log was
read from, its logged steps, the bytes the quota counts for it, when it was stored and its recorded steps; then how
much of the quota the runs use.

The bytes are what `RunStore.total_bytes` counts, run by run, so the runs' sizes add up to the total the quota is
checked against: with the database's rows a run's file (its row's size; a run stored before rows is adopted here, as
any first touch adopts it), without them its file and the two sidecars beside it. A run whose bytes cannot be read
(its file changed or gone, with no copy in the database) is listed all the same, with its size and why, since the
quota still counts it; so are the sidecars a run left behind without its file.

The format is what the stored file says of itself: a run opened from a log-less folder is stored in
trainer_state.json's shape with `written_by` naming its sources (engine/token_run.py `as_trainer_state`); any other
is TRL's own trainer_state.json, with the per-token or per-sample numbers joined to it where there are some.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.runs.domain.run_log import RunLogError, read_trainer_state
from app.runs.domain.run_store import RUN_ID, RunStore

TRL = "TRL trainer_state.json"
WRITTEN_BY = "GRPO walkthrough, from "
SIDECARS = (".records.json", ".derived.json")
# what a log-less run's `written_by` names (engine/run_opening.py, engine/unipo_opening.py), as the listing says it
SOURCES = (("prime-rl", "prime-rl token exports"), ("slime", "slime train_data"),
           ("TRL completions", "TRL completions tables"), ("verl", "verl rollout dumps"))


@dataclass(frozen=True)
class RunEntry:
    id: str
    source: str  # the file or folder it was opened from ("" where the store kept no row to say)
    format: str  # what its log was read from: "TRL trainer_state.json", "prime-rl token exports", "UNIPO canonical …"
    bytes: int  # what the quota counts for it
    stored_at: float  # unix time: its row's, else its file's modification
    steps: tuple[int, ...] = ()  # its logged steps (with those only its derived numbers have)
    recorded: dict[int, str] = field(default_factory=dict)  # recorded step -> its upload's id (a walkthrough)
    problem: str = ""  # why its log could not be read ("" when it was)


@dataclass(frozen=True)
class Usage:
    runs: int
    used: int  # bytes the quota counts: RunStore.total_bytes()
    quota: int

    @property
    def share(self) -> float:
        """The share of the quota used, in percent."""
        return 100 * self.used / self.quota if self.quota else 0.0


def log_format(document: Any, derived_names: set[str]) -> str:
    """What a stored run's log was read from, as its file says (`written_by`), and the numbers joined to it."""
    written = document.get("written_by") if isinstance(document, dict) else None
    if isinstance(written, str) and written.startswith(WRITTEN_BY):
        origin = written.removeprefix(WRITTEN_BY)
        if origin.startswith("UNIPO canonical JSON"):
            return origin  # with its files' names
        if origin.startswith("the step records' own metrics"):
            return "step records alone (their own logged metrics)"
        return " and ".join(name for key, name in SOURCES if key in origin) or origin
    joined = [what for prefix, what in (("tokens/", "per-token"), ("samples/", "per-sample"))
              if any(n.startswith(prefix) for n in derived_names)]
    return TRL + (f" + {' and '.join(joined)} numbers" if joined else "")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _entry(store: RunStore, ident: str, raw: bytes | None, size: int, stored_at: float, source: str,
           problem: str = "") -> RunEntry:
    recorded = store.recorded(ident)
    if raw is None:
        return RunEntry(ident, source, "?", size, stored_at, recorded=recorded, problem=problem)
    derived = store.derived(ident)
    try:
        document = json.loads(raw)
        log = read_trainer_state(document, source=f"run {ident}")
    except (ValueError, RecursionError, RunLogError) as exc:
        return RunEntry(ident, source, "?", size, stored_at, recorded=recorded, problem=f"its log is refused: {exc}")
    names = {name for values in derived.values() for name in values}
    steps = tuple(sorted(set(log.steps) | set(derived)))
    return RunEntry(ident, source, log_format(document, names), size, stored_at, steps, recorded)


def _file_ids(store: RunStore, suffix: str) -> set[str]:
    if not store.root.is_dir():
        return set()
    return {i for p in store.root.glob(f"*{suffix}") if RUN_ID.match(i := p.name.removesuffix(suffix))}


def list_runs(store: RunStore) -> list[RunEntry]:
    """Every stored run, oldest first; their `bytes` add up to `store.total_bytes()` (leftover sidecars included)."""
    entries: list[RunEntry] = []
    files = _file_ids(store, ".json")
    if store.refs is not None:
        refs = store.refs
        for ident in sorted(files - refs.run_ids()):
            store._adopted(ident)  # a run stored before rows: its row now, as its first read would
        for row in refs.run_listing():
            raw = store._run_bytes(row.id)
            why = "" if raw is not None else "its file is missing or changed, and the database holds no copy"
            entries.append(_entry(store, row.id, raw, row.size, row.created, row.name, why))
        for ident in sorted(files - refs.run_ids()):  # not adopted: its file no longer hashes to its name
            path = store.path(ident)
            entries.append(RunEntry(ident, "", "?", _size(path), path.stat().st_mtime,
                                    problem="its file no longer hashes to its name (counted, never shown)"))
    else:
        for ident in sorted(files):
            path = store.path(ident)
            size = _size(path) + sum(_size(path.with_suffix(s)) for s in SIDECARS)
            try:
                entries.append(_entry(store, ident, path.read_bytes(), size, path.stat().st_mtime, ""))
            except FileNotFoundError:
                continue  # deleted meanwhile
        leftovers = (_file_ids(store, SIDECARS[0]) | _file_ids(store, SIDECARS[1])) - files
        for ident in sorted(leftovers):
            paths = [store.path(ident).with_suffix(s) for s in SIDECARS]
            entries.append(RunEntry(ident, "", "?", sum(map(_size, paths)),
                                    max((p.stat().st_mtime for p in paths if p.exists()), default=0.0),
                                    problem="its run file is gone: only its sidecars are left"))
    return sorted(entries, key=lambda e: (e.stored_at, e.id))


def usage(store: RunStore) -> Usage:
    """How much of the quota the runs use (the runs counted: rows, and run files without one)."""
    runs = len(_file_ids(store, ".json") | (store.refs.run_ids() if store.refs is not None else set()))
    return Usage(runs, store.total_bytes(), store.quota_bytes)


__all__ = ["RunEntry", "Usage", "list_runs", "log_format", "usage"]
