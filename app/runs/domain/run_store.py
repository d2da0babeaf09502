"""The runs the explorer opens (issue 34), each stored once as the file it is, referenced from the database.

A run's trainer_state.json is content-addressed: its id is the first 16 hex digits of its bytes' sha256,
its file `<root>/<id>.json` (root: DATA_DIR/runs). The same bytes stored twice are one run with one link,
which lasts as long as the file. A file the reader refuses (run_log.py, by JSON path) stores nothing, nor
does one past `max_bytes` or one that would take the store past its quota. Parsed logs are kept for the
few runs read last: a 10,000-step log is read once, not per page.

Written to a temporary name and renamed: no reader sees half a file; two processes storing a run write one name.

A run's recorded steps (the recorder's step records found beside it) are uploads like any other, each in the
upload store under its own id; `<id>.records.json` beside the run maps each recorded step to that id. Opening
the same directory again with more records adds their links: the map only grows. Numbers derived from the
run's per-token or per-sample files (token_run.py, trl_completions.py) are kept beside it in `<id>.derived.json`
(step -> name -> value), joined to the log when it is read; opening again adds steps and names, never drops them.
The same document keeps the run's configuration as its folder gave it (`config`: training_args.bin's plain fields).

Given the upload store's backend (`refs`: what the server and `python -m app open` pass), the run is also a row
in the same database, with its sha256 and size, and its links and derived numbers are rows there, not sidecar
files; with PostgreSQL the run's bytes are a large object too, so a replica with another data directory opens the
run (its file is written there on first read, as a local copy). The file is checked against the row's sha256 on
every read from disk: one changed is replaced from the database's copy where there is one, else the run is
refused (logged, and no run: never another log shown under its id). A run stored before rows (its file and
sidecars, no row) is adopted on first touch: its row, links and derived numbers written from its files. Without
`refs` (tests, the benchmark, the peer tests) the files and sidecars are the whole store, as before. Only an operator
deletes a run (run_deletion.py); a log kept in memory is served only while its run is stored (`stored`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from app.runs.domain.run_derived import derived_json, merged_steps, merged_text, parsed_config, parsed_derived
from app.runs.domain.run_log import RunLog, read_trainer_state, with_metrics
from app.stores.uploads import BlobDamaged, HashCollision, RunRefs, StoreFull

log = logging.getLogger(__name__)
MB = 1024 * 1024
RUN_ID = re.compile(r"[0-9a-f]{16}\Z")


class RunRefused(ValueError):
    """Nothing stored: `status` is the HTTP status that says why (413 too big, 422 refused, 507 full)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


def run_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


class RunStore:
    def __init__(self, root: Path, *, refs: RunRefs | None = None, max_bytes: int = 64 * MB,
                 quota_bytes: int = 512 * MB, keep: int = 4) -> None:
        self.root, self.max_bytes, self.quota_bytes, self.keep = root, max_bytes, quota_bytes, keep
        self.refs = refs
        self._logs: OrderedDict[str, RunLog] = OrderedDict()
        self._lock = threading.Lock()

    def path(self, ident: str) -> Path:
        if not RUN_ID.match(ident):
            raise KeyError(ident)
        return self.root / f"{ident}.json"

    def records_path(self, ident: str) -> Path:
        return self.path(ident).with_suffix(".records.json")

    def recorded(self, ident: str) -> dict[int, str]:
        """step -> walkthrough id of the run's recorded steps ({} when none was linked, or no such run)."""
        if self.refs is not None:
            if not RUN_ID.match(ident):
                return {}
            records = self.refs.run_records(ident)
            if not records and self._adopted(ident):
                records = self.refs.run_records(ident)
            return records
        try:
            raw = json.loads(self.records_path(ident).read_text())
        except (KeyError, FileNotFoundError):
            return {}
        return {int(step): str(walkthrough) for step, walkthrough in sorted(raw.items(), key=lambda kv: int(kv[0]))}

    def recording(self, walkthrough_id: str) -> tuple[str, int, dict[int, str]] | None:
        """The run that links `walkthrough_id` as one of its recorded steps (the first by id where several do):
        (its id, the step, every recorded step of it); None when none does. Reads each run's links in turn."""
        for ident in sorted(self._linked_ids()):
            recorded = self.recorded(ident)
            step = next((s for s, w in recorded.items() if w == walkthrough_id), None)
            if step is not None:
                return ident, step, recorded
        return None

    def _linked_ids(self) -> set[str]:
        """The runs that may have recorded steps: every row's (with `refs`) and every links sidecar's."""
        files = {p.name.removesuffix(".records.json") for p in self.root.glob("*.records.json")}
        ids = files | (self.refs.run_ids() if self.refs is not None else set())
        return {i for i in ids if RUN_ID.match(i)}

    def link_records(self, ident: str, records: dict[int, str]) -> dict[int, str]:
        """Add recorded steps to a stored run (a step recorded again points at its newer record); the whole map."""
        if self.refs is not None:
            if not self._known(ident):
                raise KeyError(ident)
            if records:
                self.refs.link_run_records(ident, records)
            return self.refs.run_records(ident)
        if not self.path(ident).exists():
            raise KeyError(ident)
        with self._lock:
            merged = self.recorded(ident) | records
            if merged:
                self._write(self.records_path(ident), json.dumps({str(s): w for s, w in sorted(merged.items())},
                                                                 indent=1).encode())
        return merged

    def derived_path(self, ident: str) -> Path:
        return self.path(ident).with_suffix(".derived.json")

    def derived(self, ident: str) -> dict[int, dict[str, float]]:
        if self.refs is not None:
            text = self.refs.run_derived(ident) if RUN_ID.match(ident) else None
            return {} if text is None else parsed_derived(text)
        try:
            return parsed_derived(self.derived_path(ident).read_text())
        except (KeyError, FileNotFoundError):
            return {}

    def add_derived(self, ident: str, metrics: dict[int, dict[str, float]]) -> None:
        """Join derived per-step numbers to a stored run (a name at a step read again takes the newer value)."""
        if self.refs is not None:
            if not self._known(ident):
                raise KeyError(ident)
            if metrics:  # merged under the database's lock: two openings at once lose nothing
                self.refs.merge_run_derived(ident, lambda old: merged_text(old, metrics))
            with self._lock:
                self._logs.pop(ident, None)  # read again with them
            return
        if not self.path(ident).exists():
            raise KeyError(ident)
        with self._lock:
            if metrics:
                self._write(self.derived_path(ident), merged_text(self._derived_text(ident), metrics).encode())
            self._logs.pop(ident, None)  # read again with them

    def _derived_text(self, ident: str) -> str | None:
        if self.refs is not None:
            return self.refs.run_derived(ident) if RUN_ID.match(ident) else None
        try:
            return self.derived_path(ident).read_text()
        except (KeyError, FileNotFoundError):
            return None

    def config(self, ident: str) -> dict[str, Any] | None:
        """The configuration kept for a stored run (set_config), or None."""
        return parsed_config(self._derived_text(ident))

    def set_config(self, ident: str, config: dict[str, Any]) -> None:
        """Keep a run's configuration (plain JSON data: the fields of its training_args.bin and where they came
        from) beside its derived numbers; a newer one replaces it."""
        if self.refs is not None:
            if not self._known(ident):
                raise KeyError(ident)
            self.refs.merge_run_derived(ident, lambda old: merged_text(old, {}, config))
            return
        if not self.path(ident).exists():
            raise KeyError(ident)
        with self._lock:
            self._write(self.derived_path(ident), merged_text(self._derived_text(ident), {}, config).encode())

    def _write(self, target: Path, raw: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{target.stem}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(raw)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def add(self, raw: bytes, name: str = "trainer_state.json") -> tuple[str, bool]:
        """(id, created). Refused (RunRefused, or RunLogError naming the field) before anything is written."""
        if len(raw) > self.max_bytes:
            raise RunRefused(413, f"{name}: {len(raw) / MB:.1f} MB, past this server's {self.max_bytes // MB} MB "
                                  "for one run's trainer_state.json")
        ident = run_id(raw)
        target = self.path(ident)
        if self.refs is not None:
            return self._add_referenced(raw, name, ident, target)
        if target.exists():
            return ident, False
        log = read_trainer_state(raw, source=name)  # refused by JSON path before a byte is written
        if self.total_bytes() + len(raw) > self.quota_bytes:
            raise RunRefused(507, f"the run store is full ({self.quota_bytes // MB} MB): nothing was stored")
        self._write(target, raw)
        self._remember(ident, with_metrics(log, self.derived(ident)))
        return ident, True

    def _add_referenced(self, raw: bytes, name: str, ident: str, target: Path) -> tuple[str, bool]:
        assert self.refs is not None
        digest = hashlib.sha256(raw).hexdigest()
        stored = self.refs.run_sha256(ident)
        if stored is not None and stored != digest:
            raise RunRefused(409, f"{name}: another run already has the id {ident} (a 64-bit prefix collision)")
        if stored is not None or self._adopted(ident):
            if not target.exists() or target.read_bytes() != raw:  # stored by another replica, or the file
                self._write(target, raw)                                  # changed: this machine's copy, made good
            return ident, False
        log = read_trainer_state(raw, source=name)  # refused by JSON path before a byte is written
        had_file = target.exists()
        self._write(target, raw)  # the file first: a row never names a run no file holds
        try:
            created = self.refs.put_run(ident, digest, raw, name, self.quota_bytes - self._unreferenced_bytes())
        except (StoreFull, HashCollision) as exc:
            if not had_file:
                target.unlink(missing_ok=True)
            if isinstance(exc, HashCollision):
                raise RunRefused(409, f"{name}: another run already has the id {ident}") from None
            raise RunRefused(507, f"the run store is full ({self.quota_bytes // MB} MB): nothing was stored") from None
        self._remember(ident, with_metrics(log, self.derived(ident)))
        return ident, created

    def _known(self, ident: str) -> bool:
        """Whether a run of this id is stored (a row, or files from before rows, adopted now)."""
        assert self.refs is not None
        if not RUN_ID.match(ident):
            return False
        return self.refs.run_sha256(ident) is not None or self._adopted(ident)

    def _adopted(self, ident: str) -> bool:
        """True when `ident` is a run stored before rows (its file, sidecars, no row), given its rows just now."""
        assert self.refs is not None
        if self.refs.run_sha256(ident) is not None:
            return False
        try:
            raw = self.path(ident).read_bytes()
        except (KeyError, FileNotFoundError):
            return False
        digest = hashlib.sha256(raw).hexdigest()
        if digest[:16] != ident:
            log.error("run file %s no longer hashes to its name: not adopted", self.path(ident))
            return False
        self.refs.put_run(ident, digest, raw, f"{ident}.json", None)  # already on disk: counted, never refused
        try:
            sidecar = json.loads(self.records_path(ident).read_text())
            self.refs.link_run_records(ident, {int(step): str(upload) for step, upload in sidecar.items()})
        except FileNotFoundError:
            pass
        try:
            sidecar = self.derived_path(ident).read_text()
            old, kept = parsed_derived(sidecar), parsed_config(sidecar)
            self.refs.merge_run_derived(ident, lambda text: derived_json(  # newer rows win
                merged_steps(old, {} if text is None else parsed_derived(text)), parsed_config(text) or kept))
        except FileNotFoundError:
            pass
        return True

    def _run_bytes(self, ident: str) -> bytes | None:
        """The run's bytes, checked: this machine's file, else the database's copy (then kept as the file)."""
        assert self.refs is not None
        digest = self.refs.run_sha256(ident)
        if digest is None:
            if not self._adopted(ident):
                return None
            digest = self.refs.run_sha256(ident)
        try:
            raw = self.path(ident).read_bytes()
            if hashlib.sha256(raw).hexdigest() == digest:
                return raw
            log.error("run file %s changed since it was stored: not read", self.path(ident))
        except FileNotFoundError:
            pass
        try:
            shared = self.refs.run_bytes(ident)
        except BlobDamaged as exc:
            log.error("run %s refused: %s", ident, exc)
            return None
        if shared is None:
            log.error("run %s: its file %s is missing or changed and the database holds no copy", ident,
                      self.path(ident))
            return None
        self._write(self.path(ident), shared)
        return shared

    def stored(self, ident: str) -> bool:  # its row, else its file: another process may have deleted it
        return self.refs.run_sha256(ident) is not None if self.refs is not None else self.path(ident).exists()

    def get(self, ident: str) -> RunLog | None:
        """The run's log, or None for an id no run has (a malformed id included, or a run deleted since)."""
        with self._lock:
            cached = self._logs.get(ident)
        if cached is not None and self.stored(ident):
            self._remember(ident, cached)
            return cached
        try:
            if self.refs is not None:
                raw = self._run_bytes(ident) if RUN_ID.match(ident) else None
                if raw is None:
                    return None
            else:
                raw = self.path(ident).read_bytes()
        except (KeyError, FileNotFoundError):
            return None
        log = with_metrics(read_trainer_state(raw, source=f"run {ident}"), self.derived(ident))
        self._remember(ident, log)
        return log

    def total_bytes(self) -> int:
        if self.refs is not None:
            return self.refs.runs_total() + self._unreferenced_bytes()
        if not self.root.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.root.glob("*.json"))

    def _unreferenced_bytes(self) -> int:
        """The runs stored before rows and not adopted yet: counted against the quota all the same."""
        assert self.refs is not None
        if not self.root.is_dir():
            return 0
        referenced = self.refs.run_ids()
        return sum(p.stat().st_size for p in self.root.glob("*.json")
                   if RUN_ID.match(p.stem) and p.stem not in referenced)

    def _remember(self, ident: str, log: RunLog) -> None:
        with self._lock:
            self._logs[ident] = log
            self._logs.move_to_end(ident)
            while len(self._logs) > self.keep:
                self._logs.popitem(last=False)


__all__ = ["RunRefused", "RunStore", "run_id"]
