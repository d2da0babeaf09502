"""Snapshots opened by users: validated, capped, stored content-addressed, kept.

An upload's id is a hash of its bytes, never anything the file says, so no snapshot text
ever becomes a path or a query. The bytes live in an `UploadBackend` (upload_store/: SQLite
in the data directory, or PostgreSQL shared by replicas) and stay until an operator deletes
them (`python -m app.uploads delete ID`): a link sent to a class keeps working. A large upload (a
recorded step of a long run reaches tens of MB) lives outside its row, in a blob file or a large object, and every
read checks it against its sha256: bytes changed behind the store's back are a 404 and an error in
the log, never served. When the quota is reached new uploads are refused (507), never made
room for. Nothing in a snapshot is executed.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from app.domain.catalog import CatalogEntry, Classify, Reader, reader_for, view_only
from app.domain.snapshot import SnapshotError, parse_snapshot
from app.stores.uploads import (
    BlobDamaged,
    HashCollision,
    StoredUpload,
    StoreFull,
    StoreUnavailable,
    UploadBackend,
    open_backend,
)

log = logging.getLogger(__name__)

MB = 1024 * 1024
MAX_BYTES = 2 * MB  # a `tensorviz.graph` snapshot; a kind's reader sets its own format's limit
ID_PATTERN = re.compile(r"^[0-9a-f]{16}$")


class UploadRejected(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def upload_limit(readers: Sequence[Reader]) -> int:
    """The largest file of any format: a snapshot's limit, or a larger reader's."""
    return max([MAX_BYTES, *(r.max_bytes for r in readers)])


def upload_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def _mb(n: int) -> str:
    return f"{n / MB:.1f} MB"


class UploadStore:
    """Validation in front of a backend, and a parsed-snapshot cache bounded by bytes.

    The cache's weight of an entry is the size of its raw upload; least recently used goes
    first once `cache_bytes` is passed (an upload larger than the whole cache is not kept).
    """

    def __init__(self, backend: UploadBackend, quota_bytes: int | None = 512 * MB,
                 cache_bytes: int = 64 * MB) -> None:
        self.backend = backend
        self.quota_bytes = quota_bytes
        self.cache_limit = cache_bytes
        self._parsed: OrderedDict[str, tuple[CatalogEntry, int]] = OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()
        self.classify: Classify = view_only  # the app sets its kind registry's matcher (web/factory.py)
        self.readers: tuple[Reader, ...] = ()  # and its kinds' own file formats

    @property
    def upload_limit(self) -> int:
        return upload_limit(self.readers)

    @classmethod
    def open(cls, data_dir: Path, database_url: str | None = None, *, quota_mb: int = 512,
             cache_mb: int = 64) -> UploadStore:
        """SQLite in `data_dir`, or PostgreSQL when `database_url` is set (settings DATA_DIR, DATABASE_URL)."""
        return cls(open_backend(data_dir, database_url), quota_mb * MB, cache_mb * MB)

    def add(self, raw: bytes, filename: str = "upload.json") -> tuple[CatalogEntry, bool]:
        """Validate and keep an upload; returns (entry, created). Raises UploadRejected.

        parse_snapshot refuses deep nesting itself, before any recursive parser runs. Bytes
        already stored are never refused, however full the store is.
        """
        if len(raw) > self.upload_limit:
            raise UploadRejected(413, f"the file is larger than the {self.upload_limit // MB} MB limit of any "
                                      f"upload ({len(raw)} bytes)")
        digest = hashlib.sha256(raw).hexdigest()
        ident = digest[:16]
        entry = self._open(ident, raw)
        try:
            created = self.backend.put(ident, digest, raw, filename, self.quota_bytes)
        except StoreFull as full:
            log.warning("upload refused, storage full: %s", full)
            limit = f" of {_mb(full.limit)}" if full.limit is not None else ""
            raise UploadRejected(507, f"upload storage is full ({_mb(full.used)} used{limit}): this file was "
                                      "not stored. Uploads already made still open; try again after the "
                                      "operator frees space.") from None
        except HashCollision:
            log.error("upload id collision on %s: other bytes already stored under it", ident)
            raise UploadRejected(409, f"another upload already has the id {ident}; change any byte "
                                      "of the file (e.g. its snapshotId) and upload it again") from None
        except StoreUnavailable as exc:
            raise self._unavailable(exc) from None
        self._remember(ident, entry, len(raw))
        return entry, created

    def _open(self, ident: str, raw: bytes) -> CatalogEntry:
        """The entry for these bytes: a kind's own format (up to its reader's limit) or a snapshot
        (up to 2 MB). Raises UploadRejected (413, 422)."""
        reader = data = None
        if self.readers:
            try:
                data = json.loads(raw)  # parsed once: a reader takes it as it is
                reader = reader_for(self.readers, data)
            except (ValueError, RecursionError):
                reader = None  # not JSON: the snapshot parser below says why, by path
        limit = reader.max_bytes if reader is not None else MAX_BYTES
        what = reader.title if reader is not None else "tensorviz snapshot"
        if len(raw) > limit:
            raise UploadRejected(413, f"a {what} may be at most {limit // MB} MB; this file is {_mb(len(raw))}")
        try:
            if reader is not None:
                snapshot, payload = reader.open(data, "<upload>")
                # "upload", not the file name: the answer for a content-addressed id must be the
                # same on every worker and replica (one ETag), whoever sent the bytes first and as what.
                return CatalogEntry(ident, "upload", snapshot, None, reader.kind, payload)
            snapshot = parse_snapshot(raw, source="<upload>")
        except SnapshotError as exc:
            raise UploadRejected(422, str(exc)) from None
        return CatalogEntry(ident, "upload", snapshot, None, self.classify(snapshot))

    def get(self, ident: str) -> CatalogEntry | None:
        if not ID_PATTERN.fullmatch(ident):
            return None  # only our own hex ids ever reach the backend
        try:
            with self._lock:
                hit = self._parsed.get(ident)
            if hit is not None:
                # an operator may have deleted it, through any worker or replica: one indexed lookup
                if not self.backend.exists(ident):
                    self._forget(ident)
                    return None
                with self._lock:
                    if ident in self._parsed:
                        self._parsed.move_to_end(ident)
                return hit[0]
            raw = self.backend.get(ident)
        except BlobDamaged as exc:  # its bytes changed or went missing outside the database: never served
            log.error("stored upload %s refused: %s", ident, exc)
            return None
        except StoreUnavailable as exc:
            raise self._unavailable(exc) from None
        if raw is None:
            return None
        try:
            entry = self._open(ident, raw)
        except UploadRejected as exc:  # stored uploads were valid; a changed parser may disagree
            log.warning("stored upload %s no longer loads: %s", ident, exc)
            return None
        self._remember(ident, entry, len(raw))
        return entry

    def delete(self, ident: str) -> bool:
        """Remove an upload for good (this process's cache too; other workers see it gone at once)."""
        if not ID_PATTERN.fullmatch(ident):
            return False
        self._forget(ident)
        return self.backend.delete(ident)

    def exists(self, ident: str) -> bool:
        """Whether `ident` is stored now (one indexed lookup); False when the store cannot say."""
        if not ID_PATTERN.fullmatch(ident):
            return False
        try:
            return self.backend.exists(ident)
        except StoreUnavailable:
            return False

    def listing(self) -> list[StoredUpload]:
        return self.backend.listing()

    def total_bytes(self) -> int:
        return self.backend.total_bytes()

    def close(self) -> None:
        self.backend.close()

    # -- the parsed cache ------------------------------------------------------------------

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def cached_ids(self) -> list[str]:
        """Least recently used first."""
        with self._lock:
            return list(self._parsed)

    def _remember(self, ident: str, entry: CatalogEntry, weight: int) -> None:
        with self._lock:
            old = self._parsed.pop(ident, None)
            if old is not None:
                self._cached_bytes -= old[1]
            if weight > self.cache_limit:
                return
            self._parsed[ident] = (entry, weight)
            self._cached_bytes += weight
            while self._cached_bytes > self.cache_limit:
                _, (_, dropped) = self._parsed.popitem(last=False)
                self._cached_bytes -= dropped

    def _forget(self, ident: str) -> None:
        with self._lock:
            old = self._parsed.pop(ident, None)
            if old is not None:
                self._cached_bytes -= old[1]

    @staticmethod
    def _unavailable(exc: StoreUnavailable) -> UploadRejected:
        log.error("upload storage unavailable: %s", exc)
        return UploadRejected(503, "upload storage is unavailable just now; try again in a moment")
