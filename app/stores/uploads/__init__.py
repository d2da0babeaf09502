"""Where upload bytes live: one small interface, two implementations.

`UploadBackend` keeps raw bytes under their content id and knows nothing of snapshots;
`domain.uploads.UploadStore` validates before storing and keeps the parsed cache.

- `SqliteBackend` (the default): one SQLite file in the data directory, shared by all
  worker processes of one machine.
- `PostgresBackend` (DATABASE_URL=postgresql://...): one table shared by several replicas.

A payload past `INLINE_MAX` bytes lives outside its row, which keeps its sha256, size and where it is:
with SQLite a content-addressed file `DATA_DIR/blobs/<sha256>`, with PostgreSQL a large object (so every
replica reads it). Every read checks the bytes against the row's sha256: a blob changed or gone is
`BlobDamaged`, never other bytes served. Rows written before blobs existed (their bytes inline) read as before.

The same backend keeps the references to the runs the explorer opens (`RunRefs`): one row per run (its
trainer_state.json's sha256, size and, with PostgreSQL, the large object holding its bytes) and one per
recorded step's link to its upload, so runs and their links are in the database as uploads are.

Nothing is ever evicted: `put` refuses with `StoreFull` when the quota would be passed,
and only an operator deletes (`python -m app.uploads delete ID`; a run and its rows: `python -m app runs delete ID`).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# One table in both backends (prefixed, so it can share a PostgreSQL database with others).
TABLE = "grpo_uploads"
RUNS_TABLE = "grpo_runs"
RUN_RECORDS_TABLE = "grpo_run_records"
SQLITE_FILE = "uploads.sqlite3"
BLOB_DIR = "blobs"  # beside the SQLite file: DATA_DIR/blobs/<sha256>
FILENAME_MAX = 255
# Past this many bytes a payload is kept out of its row. A recorded step of a long run reaches tens of MB: in a row it
# would be read whole by SQLite (and again, hex-encoded, by libpq) before a byte reached Python.
INLINE_MAX = 1024 * 1024
LO_CHUNK = 1024 * 1024  # a large object is written and read this many bytes per statement


class StoreFull(Exception):
    """Storing these bytes would pass the quota (or the disk is full); nothing was written."""

    def __init__(self, used: int, limit: int | None, size: int) -> None:
        super().__init__(f"upload storage full: {used} bytes used of {limit}, {size} more refused")
        self.used, self.limit, self.size = used, limit, size


class StoreUnavailable(Exception):
    """The backend could not be reached or answered with an error (a 503, try again)."""


class BlobDamaged(StoreUnavailable):
    """Stored bytes outside their row are missing or no longer hash to the row's sha256: refused, not served."""


class HashCollision(Exception):
    """Other bytes are already stored under this 16-hex id (a 64-bit prefix collision)."""


def checked(raw: bytes, sha256: str, what: str) -> bytes:
    """`raw` if it hashes to `sha256`; else BlobDamaged naming `what` (bytes changed since stored)."""
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise BlobDamaged(f"{what}: the stored bytes no longer match their sha256 {sha256[:16]}…; "
                          "refused rather than served (restore them from a backup, or delete and store again)")
    return raw


@dataclass(frozen=True)
class StoredUpload:
    id: str
    size: int
    filename: str  # as sent by the first uploader: operator listings only, never a path
    created: float  # unix time


@dataclass(frozen=True)
class StoredRunRow:
    id: str
    size: int  # the run file's bytes: what the quota counts
    name: str  # the file or folder it was opened from, for operators only
    created: float  # unix time


class RunRefs(Protocol):
    """The runs' rows: a run's sha256, size and name, its bytes where replicas share them, its links."""

    def put_run(self, ident: str, sha256: str, raw: bytes, name: str, limit: int | None) -> bool:
        """Keep the run's row (with PostgreSQL its bytes too) unless already there; True if new.

        Raises StoreFull past `limit` (the runs' bytes counted, as uploads are), HashCollision, StoreUnavailable."""
        ...

    def run_sha256(self, ident: str) -> str | None:
        """The stored run's whole sha256; None when no row names it."""
        ...

    def run_bytes(self, ident: str) -> bytes | None:
        """The run's bytes from the database, checked against its sha256 (BlobDamaged if they differ);
        None where the database holds no copy (SQLite: the file in DATA_DIR/runs is the run)."""
        ...

    def runs_total(self) -> int: ...

    def run_ids(self) -> set[str]: ...

    def run_listing(self) -> list[StoredRunRow]: ...

    def delete_run(self, ident: str) -> bool:
        """Remove the run's row, its links and (PostgreSQL) its bytes in one transaction; False when no row."""
        ...

    def link_run_records(self, ident: str, records: dict[int, str]) -> None:
        """Link recorded steps to their uploads (a step linked again points at the newer upload)."""
        ...

    def run_records(self, ident: str) -> dict[int, str]: ...

    def run_derived(self, ident: str) -> str | None:
        """The run's derived numbers as the JSON text last merged; None when none."""
        ...

    def merge_run_derived(self, ident: str, merge: Callable[[str | None], str]) -> None:
        """Replace the derived text with merge(the text stored), under one lock for every process."""
        ...


class UploadBackend(RunRefs, Protocol):
    def put(self, ident: str, sha256: str, raw: bytes, filename: str, limit: int | None) -> bool:
        """Store `raw` under `ident` unless already there; True if it was new.

        Atomic across processes: the quota check and the insert happen under one lock, and
        bytes already stored are never refused. Raises StoreFull, HashCollision, StoreUnavailable.
        """
        ...

    def get(self, ident: str) -> bytes | None:
        """The bytes stored under `ident`, checked against their sha256 (BlobDamaged if they differ)."""
        ...

    def exists(self, ident: str) -> bool: ...

    def total_bytes(self) -> int: ...

    def delete(self, ident: str) -> bool: ...

    def listing(self) -> list[StoredUpload]: ...

    def describe(self) -> str:
        """Where the bytes are, for operators and logs (never a password)."""
        ...

    def close(self) -> None: ...


def open_backend(data_dir: Path, database_url: str | None = None) -> UploadBackend:
    """PostgreSQL when `database_url` is set, else SQLite in `data_dir`."""
    if database_url:
        from app.stores.uploads.postgres import PostgresBackend  # psycopg is imported only when asked for

        return PostgresBackend(database_url)
    from app.stores.uploads.sqlite import SqliteBackend

    return SqliteBackend(Path(data_dir) / SQLITE_FILE)
