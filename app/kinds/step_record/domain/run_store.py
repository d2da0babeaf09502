"""The runs the explorer opens (issue 34), each stored once as the file it is, outside every database row.

A run's trainer_state.json is content-addressed: its id is the first 16 hex digits of its bytes' sha256,
its file `<root>/<id>.json` (root: DATA_DIR/runs). The same bytes stored twice are one run with one link,
which lasts as long as the file. A file the reader refuses (run_log.py, by JSON path) stores nothing, nor
does one past `max_bytes` or one that would take the store past its quota. Parsed logs are kept for the
few runs read last: a 10,000-step log is read once, not per page.

Written to a temporary name and renamed, so a reader never sees half a file, and two processes storing
the same run write the same bytes to the same name.

A run's recorded steps (the recorder's step records found beside it) are uploads like any other, each in the
upload store under its own id; `<id>.records.json` beside the run maps each recorded step to that id. Opening
the same directory again with more records adds their links: the map only grows. Numbers derived from the
run's per-token or per-sample files (token_run.py, trl_completions.py) are kept beside it in `<id>.derived.json`
(step -> name -> value), joined to the log when it is read; opening again adds steps and names, never drops them.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from app.kinds.step_record.domain.run_log import RunLog, read_trainer_state, with_metrics

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
    def __init__(self, root: Path, *, max_bytes: int = 64 * MB, quota_bytes: int = 512 * MB, keep: int = 4) -> None:
        self.root, self.max_bytes, self.quota_bytes, self.keep = root, max_bytes, quota_bytes, keep
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
        try:
            raw = json.loads(self.records_path(ident).read_text())
        except (KeyError, FileNotFoundError):
            return {}
        return {int(step): str(walkthrough) for step, walkthrough in sorted(raw.items(), key=lambda kv: int(kv[0]))}

    def link_records(self, ident: str, records: dict[int, str]) -> dict[int, str]:
        """Add recorded steps to a stored run (a step recorded again points at its newer record); the whole map."""
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
        try:
            raw = json.loads(self.derived_path(ident).read_text())
        except (KeyError, FileNotFoundError):
            return {}
        return {int(step): {str(k): float(v) for k, v in values.items()} for step, values in raw.items()}

    def add_derived(self, ident: str, metrics: dict[int, dict[str, float]]) -> None:
        """Join derived per-step numbers to a stored run (a name at a step read again takes the newer value)."""
        if not self.path(ident).exists():
            raise KeyError(ident)
        with self._lock:
            merged = self.derived(ident)
            for step, values in metrics.items():
                merged[step] = merged.get(step, {}) | values
            if merged:
                self._write(self.derived_path(ident), json.dumps(
                    {str(s): v for s, v in sorted(merged.items())}).encode())
            self._logs.pop(ident, None)  # read again with them

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
        if target.exists():
            return ident, False
        log = read_trainer_state(raw, source=name)  # refused by JSON path before a byte is written
        if self.total_bytes() + len(raw) > self.quota_bytes:
            raise RunRefused(507, f"the run store is full ({self.quota_bytes // MB} MB): nothing was stored")
        self._write(target, raw)
        self._remember(ident, with_metrics(log, self.derived(ident)))
        return ident, True

    def get(self, ident: str) -> RunLog | None:
        """The run's log, or None for an id no run has (a malformed id included)."""
        with self._lock:
            if ident in self._logs:
                self._logs.move_to_end(ident)
                return self._logs[ident]
        try:
            raw = self.path(ident).read_bytes()
        except (KeyError, FileNotFoundError):
            return None
        log = with_metrics(read_trainer_state(raw, source=f"run {ident}"), self.derived(ident))
        self._remember(ident, log)
        return log

    def total_bytes(self) -> int:
        if not self.root.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.root.glob("*.json"))

    def _remember(self, ident: str, log: RunLog) -> None:
        with self._lock:
            self._logs[ident] = log
            self._logs.move_to_end(ident)
            while len(self._logs) > self.keep:
                self._logs.popitem(last=False)


__all__ = ["RunRefused", "RunStore", "run_id"]
