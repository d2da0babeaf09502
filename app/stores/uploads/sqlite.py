"""Uploads in one SQLite file (Python's sqlite3): the embedded default.

WAL mode, so readers never wait for a writer; `BEGIN IMMEDIATE` around each insert, so the
quota check and the insert are one step for every process sharing the file.
"""
from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.stores.uploads import FILENAME_MAX, TABLE, HashCollision, StoredUpload, StoreFull, StoreUnavailable

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id         TEXT PRIMARY KEY,   -- sha256(data)[:16], hex: the upload's id and URL
    sha256     TEXT NOT NULL,      -- the whole hash: a prefix collision is refused, never served
    size       INTEGER NOT NULL,   -- len(data): what the quota counts
    filename   TEXT NOT NULL,      -- as first sent; for the operator's listing only
    created_at REAL NOT NULL,      -- unix time
    data       BLOB NOT NULL       -- last, so scans of the columns above skip the bytes
);
CREATE INDEX IF NOT EXISTS {TABLE}_size ON {TABLE} (size);  -- SUM(size) from the index alone
"""
SQLITE_FULL = 13


class SqliteBackend:
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._timeout = timeout
        self._local = threading.local()  # one connection per thread: sqlite3's own rule
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors():
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
            conn.executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            conn.execute("PRAGMA synchronous=FULL")  # a 201 means on disk, power cut or not (writes are rare)
            conn.execute("PRAGMA cache_size=-1024")  # 1 MB per connection (one per thread), not 2 MB
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL:
                raise StoreFull(self.total_bytes_or_zero(), None, 0) from exc
            raise StoreUnavailable(f"sqlite {self.path}: {exc}") from exc

    def total_bytes_or_zero(self) -> int:
        try:
            return self.total_bytes()
        except (sqlite3.Error, StoreUnavailable):
            return 0

    def put(self, ident: str, sha256: str, raw: bytes, filename: str, limit: int | None) -> bool:
        with self._errors():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")  # the write lock, across processes, before the quota check
            try:
                row = conn.execute(f"SELECT sha256 FROM {TABLE} WHERE id = ?", (ident,)).fetchone()
                if row is not None:
                    conn.execute("COMMIT")
                    if row[0] != sha256:
                        raise HashCollision(ident)
                    return False
                used = conn.execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone()[0]
                if limit is not None and used + len(raw) > limit:
                    conn.execute("COMMIT")
                    raise StoreFull(used, limit, len(raw))
                conn.execute(f"INSERT INTO {TABLE} (id, sha256, size, filename, created_at, data) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             (ident, sha256, len(raw), filename[:FILENAME_MAX], time.time(), raw))
                conn.execute("COMMIT")
                return True
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def get(self, ident: str) -> bytes | None:
        with self._errors():
            row = self._conn().execute(f"SELECT data FROM {TABLE} WHERE id = ?", (ident,)).fetchone()
        return None if row is None else bytes(row[0])

    def exists(self, ident: str) -> bool:
        with self._errors():
            return self._conn().execute(f"SELECT 1 FROM {TABLE} WHERE id = ?", (ident,)).fetchone() is not None

    def total_bytes(self) -> int:
        with self._errors():
            return int(self._conn().execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone()[0])

    def delete(self, ident: str) -> bool:
        with self._errors():
            return self._conn().execute(f"DELETE FROM {TABLE} WHERE id = ?", (ident,)).rowcount > 0

    def listing(self) -> list[StoredUpload]:
        with self._errors():
            rows = self._conn().execute(
                f"SELECT id, size, filename, created_at FROM {TABLE} ORDER BY created_at, id").fetchall()
        return [StoredUpload(r[0], int(r[1]), r[2], float(r[3])) for r in rows]

    def describe(self) -> str:
        return f"sqlite {self.path}"

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.ProgrammingError:  # made in another thread; closed with the process
                pass
        self._local = threading.local()
