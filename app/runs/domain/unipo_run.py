"""A whole UNIPO canonical file as a run (issue 34), read one entry at a time.

UNIPO (poloclub/unipo, docs/canonical_schema.json) writes a run as one JSON document: `header`, `entries` (one per
model update: `step`, `metrics`, optionally `prompts` with their responses' per-token arrays) and, optionally,
`blueprint.prompts`, which UNIPO's own scripts/build_data.py uses for every entry that holds no prompts of its own.
Such files "easily reach 1 GB", so nothing here holds more than one entry: ijson (its C parser) streams the file,
and the header (which may come after the entries) is found by a pass of its own.

What a run is made of: every entry's `metrics` at its `step` (the run's logged metrics), and every entry holding
prompts, or every entry when there is a blueprint, as one step record: a UNIPO file of that one entry (the same
header, the blueprint when the entry uses it), which the record kind reads as any uploaded UNIPO file
(domain/unipo.py) and whose refusals are said here by the whole file's paths (`entries[12].prompts[0]...`).

A whole file is refused, by UNIPO's path, for what would make its log wrong: no header, no entries, an entry that is
not an object, a step that is not an integer ≥ 0 or that goes back, a metric that is not a number (null is a metric
not logged at that step), two entries of one step that disagree, or bytes that are not JSON (NaN and Infinity
included: JSON has neither; domain/unipo.py refuses them too).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ijson  # type: ignore[import-untyped]

from app.domain.json_path import render_loc
from app.kinds.step_record.domain.unipo import parse_unipo
from app.kinds.step_record.domain.validation import RecordError
from app.runs.domain.run_log import NOT_METRICS, SUMMARY_KEYS, RunLogError

# Parser events read, at most, past keys that say nothing, before a file is judged not UNIPO's: a file whose first
# top-level keys are header, entries or blueprint is told at once; a large value under another key first is not
# walked to its end.
SNIFF_EVENTS = 100_000
UNIPO_KEYS = {"header": "start_map", "entries": "start_array", "blueprint": "start_map"}  # each with its value's kind
OTHER_KEYS = frozenset({"format", "log_history"})  # our step record's, TRL's trainer_state.json's
# A UNIPO metric of these names would read, in trainer_state.json's shape, as the step itself or as TRL's closing
# entry: it is kept under this prefix instead
RENAMED = "unipo/"


def is_unipo_file(path: Path) -> bool:
    """A canonical UNIPO file, told by its top-level keys read as a stream: `header` (an object), `entries` (a
    list) or `blueprint` (an object) before `format` (a step record) or `log_history` (TRL's trainer_state.json).
    Unreadable or not JSON: False."""
    key = None
    try:
        with path.open("rb") as f:
            for n, (prefix, event, value) in enumerate(ijson.parse(f)):
                if n == 0 and event != "start_map":
                    return False
                if key is not None and prefix == key:
                    if event == UNIPO_KEYS[key]:
                        return True
                    key = None
                if prefix == "" and event == "map_key":
                    if value in UNIPO_KEYS:
                        key = value
                    if value in OTHER_KEYS:
                        return False
                if n > SNIFF_EVENTS or (prefix == "" and event == "end_map"):
                    return False
    except (OSError, ijson.JSONError, ValueError):
        return False
    return False


def unipo_files(root: Path) -> tuple[Path, ...]:
    """The UNIPO canonical files of a run directory: its own *.json (not trainer_state.json nor a step record),
    each recognised by is_unipo_file, in name order."""
    if not root.is_dir():
        return ()
    return tuple(p for p in sorted(root.glob("*.json")) if p.is_file() and p.name != "trainer_state.json"
                 and not p.name.endswith(".grpo-step.json") and is_unipo_file(p))


def becomes_record(entry: Any, blueprint: list | None) -> bool:
    """UNIPO's own rule (build_data.py): an entry's prompts, else the blueprint's, make a step file."""
    return isinstance(entry, dict) and (entry.get("prompts") is not None or blueprint is not None)


def opens_as_run(path: Path, record_limit: int) -> bool:
    """Whether `python -m app open FILE` opens a UNIPO file as a run rather than as one step record: always past
    `record_limit` (no single record is that large); else unless exactly one of its entries becomes a record."""
    if path.stat().st_size > record_limit:
        return True
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return False  # the record reader says why, by path
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        return False
    blueprint = data.get("blueprint")
    shared = blueprint.get("prompts") if isinstance(blueprint, dict) else None
    return sum(becomes_record(e, shared) for e in data["entries"]) != 1


@dataclass(frozen=True)
class UnipoRun:
    path: Path
    header: dict[str, Any]
    blueprint: list | None  # blueprint.prompts, when the file has it (held once: every record without prompts uses it)
    metrics: dict[int, dict[str, float]]  # step -> name -> value, every entry's
    recorded: tuple[tuple[int, int], ...]  # (entry index, step) of each entry that becomes a step record
    entries: int
    renamed: tuple[str, ...] = ()  # metric names kept under RENAMED


class _File:
    def __init__(self, path: Path, source: str):
        self.path, self.source = path, source

    def fail(self, where: tuple[int | str, ...] | str, message: str) -> RunLogError:
        return RunLogError(where if isinstance(where, str) else render_loc(where), message, self.source)

    def items(self, prefix: str) -> Iterator[Any]:
        """The values at `prefix`, built one at a time; a parse error is refused at `prefix`'s path."""
        with self.path.open("rb") as f:
            yield from ijson.items(f, prefix, use_float=True)

    def first(self, prefix: str) -> Any:
        try:
            return next(self.items(prefix), None)
        except ijson.JSONError as exc:
            raise self.located(exc) from None

    def located(self, exc: Exception) -> RunLogError:
        """Bytes that are not JSON, refused at the entry they break when they are in one (`$` else)."""
        at = 0
        try:
            for _ in self.items("entries.item"):
                at += 1
        except ijson.JSONError as inner:
            return self.fail(("entries", at), _not_json(inner))
        return self.fail("$", _not_json(exc))


def _not_json(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = " (NaN and Infinity are not JSON: null is a value not logged)" if "invalid char" in first else ""
    return f"not JSON: {first}{hint}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(type(value),
                                                                                       type(value).__name__)


def read_unipo_run(path: Path, source: str | None = None) -> UnipoRun:
    """Every entry's metrics and which entries become step records; RunLogError by UNIPO's path for a file whose
    log would be wrong (nothing of it is then stored). Three passes: the header, the blueprint, the entries."""
    f = _File(path, source or str(path))
    header = f.first("header")
    if header is None:
        raise f.fail("header", "missing: a UNIPO canonical file has `header` and `entries` at the top level")
    if not isinstance(header, dict):
        raise f.fail("header", f"must be an object, not {_kind(header)}")
    blueprint = f.first("blueprint")
    shared = blueprint.get("prompts") if isinstance(blueprint, dict) else None
    if shared is not None and not isinstance(shared, list):
        raise f.fail("blueprint.prompts", f"must be a list, not {_kind(shared)}")
    metrics: dict[int, dict[str, float]] = {}
    first_at: dict[tuple[int, str], int] = {}  # (step, name) -> the entry that logged it first
    recorded: list[tuple[int, int]] = []
    renamed: set[str] = set()
    last, count = -1, 0
    try:
        for i, entry in enumerate(f.items("entries.item")):
            count = i + 1
            if not isinstance(entry, dict):
                raise f.fail(("entries", i), f"must be an object, not {_kind(entry)}")
            step = entry.get("step")
            if step is None:
                raise f.fail(("entries", i, "step"), "missing")
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise f.fail(("entries", i, "step"), f"must be an integer ≥ 0, not {json.dumps(step)}")
            if step < last:
                raise f.fail(("entries", i, "step"), f"{step} after {last}: steps must not go back")
            last = step
            logged = entry.get("metrics", {})
            if logged is None:
                logged = {}
            if not isinstance(logged, dict):
                raise f.fail(("entries", i, "metrics"), f"must be an object, not {_kind(logged)}")
            values = metrics.setdefault(step, {})
            for key, value in logged.items():
                if value is None:
                    continue  # not logged at this step
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise f.fail(("entries", i, "metrics", key), f"must be a number (or null), not {_kind(value)}")
                name = RENAMED + key if key in NOT_METRICS or key in SUMMARY_KEYS else key
                if name != key:
                    renamed.add(key)
                if name in values and values[name] != float(value):
                    raise f.fail(("entries", i, "metrics", key),
                                 f"{value!r} disagrees with {values[name]!r} logged for step {step} at "
                                 f"entries[{first_at[step, name]}]")
                values[name] = float(value)
                first_at.setdefault((step, name), i)
            if becomes_record(entry, shared):
                recorded.append((i, step))
    except ijson.JSONError as exc:
        raise f.fail(("entries", count), _not_json(exc)) from None
    if not count:
        raise f.fail("entries", _no_entries(f))
    return UnipoRun(path, header, shared, metrics, tuple(recorded), count, tuple(sorted(renamed)))


def _no_entries(f: _File) -> str:
    entries = f.first("entries")
    if entries is None:
        return "missing: a UNIPO canonical file has `header` and `entries` at the top level"
    if not isinstance(entries, list):
        return f"must be a list, not {_kind(entries)}"
    return "holds no entry: nothing to open"


@dataclass(frozen=True)
class UnipoRecord:
    index: int  # the entry's, in the whole file
    step: int
    raw: bytes  # a UNIPO file of this one entry
    filename: str  # what the upload store names it by


def unipo_records(run: UnipoRun) -> Iterator[UnipoRecord]:
    """Each entry that becomes a step record, one at a time and in file order, as a one-entry UNIPO file for the
    upload store (which reads it as any uploaded UNIPO file). Only its bytes are held while it is stored: the entry
    as parsed is let go first."""
    wanted = dict(run.recorded)
    f = _File(run.path, str(run.path))
    entries = enumerate(f.items("entries.item"))
    while True:
        try:
            i, entry = next(entries)
        except StopIteration:
            return
        except ijson.JSONError as exc:  # the file changed since it was read: the records left are not stored
            raise f.fail("entries", _not_json(exc) + " (read again for its step records)") from None
        if i not in wanted:
            continue
        doc: dict[str, Any] = {"header": run.header, "entries": [entry]}
        if entry.get("prompts") is None:
            doc["blueprint"] = {"prompts": run.blueprint}
        raw = json.dumps(doc, ensure_ascii=False).encode()
        del doc, entry
        yield UnipoRecord(i, wanted[i], raw, f"{run.path.stem}.step-{wanted[i]}.json")


def record_refusals(record: UnipoRecord) -> tuple[tuple[str, str], ...]:
    """Why the record kind refuses this entry's record, each by the whole file's path (`entries[12].prompts[0]…`
    where the one-entry file says entries[0]); () when it reads it."""
    try:
        parse_unipo(json.loads(record.raw), record.filename)
    except RecordError as exc:
        return tuple((_whole_path(p, record.index), m) for p, m in exc.errors)
    return ()


def _whole_path(path: str, index: int) -> str:
    """A path in the one-entry file as the whole file's: its entries[0] is the file's entries[index]."""
    return f"entries[{index}]" + path[len("entries[0]"):] if path.startswith("entries[0]") else path


__all__ = ["UnipoRecord", "UnipoRun", "becomes_record", "is_unipo_file", "opens_as_run", "read_unipo_run",
           "record_refusals", "unipo_files", "unipo_records"]
