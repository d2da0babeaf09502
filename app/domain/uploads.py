"""Snapshots opened by users: validated, capped, stored content-addressed.

An upload's id is a hash of its bytes, never anything the file says, so no
snapshot text ever becomes a path. Files live in one folder shared by all
worker processes (so any worker can serve any upload) and at most
`max_uploads` are kept, oldest first out. Nothing in a snapshot is executed.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path

from .catalog import CatalogEntry
from .snapshot import SnapshotError, parse_snapshot

log = logging.getLogger(__name__)

MAX_BYTES = 2 * 1024 * 1024
ID_PATTERN = re.compile(r"^[0-9a-f]{16}$")


class UploadRejected(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def upload_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


class UploadStore:
    def __init__(self, directory: Path, max_uploads: int = 64, parsed_cache: int = 32) -> None:
        self.directory = directory
        self.max_uploads = max_uploads
        self._parsed: OrderedDict[str, CatalogEntry] = OrderedDict()
        self._parsed_max = parsed_cache
        self._lock = threading.Lock()

    def add(self, raw: bytes, filename: str = "upload.json") -> tuple[CatalogEntry, bool]:
        """Validate and keep an upload; returns (entry, created). Raises UploadRejected.

        parse_snapshot refuses deep nesting itself, before any recursive parser runs.
        """
        if len(raw) > MAX_BYTES:
            raise UploadRejected(413, f"the file is larger than the 2 MB limit ({len(raw)} bytes)")
        ident = upload_id(raw)
        try:
            snapshot = parse_snapshot(raw, source="<upload>")
        except SnapshotError as exc:
            raise UploadRejected(422, str(exc)) from None
        path = self._path(ident)
        created = not path.exists()
        if created:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(raw)
            os.replace(tmp, path)  # atomic: another worker never reads half a file
            self._evict()
        else:
            path.touch()  # a re-upload counts as recent
        entry = CatalogEntry(ident, f"upload of {filename}", snapshot, None)
        self._remember(ident, entry)
        return entry, created

    def get(self, ident: str) -> CatalogEntry | None:
        if not ID_PATTERN.fullmatch(ident):
            return None  # only our own hex ids ever reach the file system
        path = self._path(ident)
        if not path.exists():  # evicted, perhaps by another worker
            with self._lock:
                self._parsed.pop(ident, None)
            return None
        with self._lock:
            if ident in self._parsed:
                self._parsed.move_to_end(ident)
                return self._parsed[ident]
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        try:
            entry = CatalogEntry(ident, "upload", parse_snapshot(raw, source="<upload>"), None)
        except SnapshotError as exc:  # stored files were valid; a changed parser may disagree
            log.warning("stored upload %s no longer loads: %s", ident, exc)
            return None
        self._remember(ident, entry)
        return entry

    def _path(self, ident: str) -> Path:
        return self.directory / f"{ident}.json"

    def _remember(self, ident: str, entry: CatalogEntry) -> None:
        with self._lock:
            self._parsed[ident] = entry
            self._parsed.move_to_end(ident)
            while len(self._parsed) > self._parsed_max:
                self._parsed.popitem(last=False)

    def _evict(self) -> None:
        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except FileNotFoundError:  # another worker evicted it first
                return 0.0
        files = sorted(self.directory.glob("*.json"), key=mtime)
        for old in files[:max(0, len(files) - self.max_uploads)]:
            old.unlink(missing_ok=True)
            with self._lock:
                self._parsed.pop(old.stem, None)
