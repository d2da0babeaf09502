"""Where upload bytes live: one small interface, two implementations.

`UploadBackend` keeps raw bytes under their content id and knows nothing of snapshots;
`domain.uploads.UploadStore` validates before storing and keeps the parsed cache.

- `SqliteBackend` (the default): one SQLite file in the data directory, shared by all
  worker processes of one machine.
- `PostgresBackend` (DATABASE_URL=postgresql://...): one table shared by several replicas.

Nothing is ever evicted: `put` refuses with `StoreFull` when the quota would be passed,
and only an operator deletes (`python -m app.uploads delete ID`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# One table in both backends (prefixed, so it can share a PostgreSQL database with others).
TABLE = "grpo_uploads"
SQLITE_FILE = "uploads.sqlite3"
FILENAME_MAX = 255


class StoreFull(Exception):
    """Storing these bytes would pass the quota (or the disk is full); nothing was written."""

    def __init__(self, used: int, limit: int | None, size: int) -> None:
        super().__init__(f"upload storage full: {used} bytes used of {limit}, {size} more refused")
        self.used, self.limit, self.size = used, limit, size


class StoreUnavailable(Exception):
    """The backend could not be reached or answered with an error (a 503, try again)."""


class HashCollision(Exception):
    """Other bytes are already stored under this 16-hex id (a 64-bit prefix collision)."""


@dataclass(frozen=True)
class StoredUpload:
    id: str
    size: int
    filename: str  # as sent by the first uploader: operator listings only, never a path
    created: float  # unix time


class UploadBackend(Protocol):
    def put(self, ident: str, sha256: str, raw: bytes, filename: str, limit: int | None) -> bool:
        """Store `raw` under `ident` unless already there; True if it was new.

        Atomic across processes: the quota check and the insert happen under one lock, and
        bytes already stored are never refused. Raises StoreFull, HashCollision, StoreUnavailable.
        """
        ...

    def get(self, ident: str) -> bytes | None: ...

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
