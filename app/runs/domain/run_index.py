"""What a run directory's per-token and per-sample files gave, and what a UNIPO run's opening made of its canonical
files (engine/run_opening.py: the metrics and the linked records' upload ids), kept so a run opened again reads none
of them (issue 34: a run of up to 1 GB is "read in place, indexed once").

An entry is keyed by the directory's resolved path and the reader's name, and holds the files the reader saw with
their size and modification time (nanoseconds) next to what it made of them. It is used only while every file is
still there with the same size and time and no file was added or removed; anything else and the reader reads the
directory again and the entry is replaced. (A file rewritten in place to the same size within the same nanosecond
would be missed: no framework writes its step files that way.) A read that refused a file is not kept: the file
may be fixed, or be readable (permissions, a mount), the next time, and its refusal must be said again.

The entries sit in DATA_DIR/runs/index/, small JSON files of numbers: they are the reader's output, not the data,
so they count toward no quota.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Fingerprint = dict[str, list[int]]  # file (relative to the directory) -> [size, mtime_ns]


def fingerprint(directory: Path, files: Iterable[Path]) -> Fingerprint:
    out: Fingerprint = {}
    for path in files:
        st = path.stat()
        out[str(path.relative_to(directory))] = [st.st_size, st.st_mtime_ns]
    return dict(sorted(out.items()))


class ReadIndex:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, directory: Path, reader: str) -> Path:
        key = hashlib.sha256(f"{directory.resolve()}\0{reader}".encode()).hexdigest()[:24]
        return self.root / f"{reader}-{key}.json"

    def get(self, directory: Path, reader: str, files: Fingerprint) -> dict[str, Any] | None:
        """The reader's stored output for these exact files, or None (never indexed, or the files changed)."""
        try:
            entry = json.loads(self._path(directory, reader).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("files") != files or not isinstance(entry.get("value"), dict):
            return None
        return entry["value"]

    def put(self, directory: Path, reader: str, files: Fingerprint, value: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        target = self._path(directory, reader)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"directory": str(directory.resolve()), "files": files, "value": value}))
        tmp.replace(target)  # whole or not at all: a reader never meets half an entry


def step_keys(metrics: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per-step metrics as JSON stores them (the step a string) back to the readers' shape."""
    return {int(step): {k: float(v) for k, v in values.items()} for step, values in metrics.items()}


__all__ = ["Fingerprint", "ReadIndex", "fingerprint", "step_keys"]
