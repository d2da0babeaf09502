"""Uploads in one SQLite file (Python's sqlite3): the embedded default.

WAL mode, so readers never wait for a writer; `BEGIN IMMEDIATE` around each write, so the
quota check and the insert are one step for every process sharing the file.

A payload past `inline_max` bytes is a content-addressed file `blobs/<sha256>` beside the database
(written, synced and renamed inside the insert's lock; its row's `blob` column names it, its `data`
is empty). A crash between the rename and the commit leaves a file no row names: harmless, and the
same bytes stored again write the same name. Databases made before blobs get the column on opening.
"""
from __future__ import annotations

import errno
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from app.stores.uploads import (
    BLOB_DIR,
    FILENAME_MAX,
    INLINE_MAX,
    RUN_RECORDS_TABLE,
    RUNS_TABLE,
    TABLE,
    BlobDamaged,
    HashCollision,
    StoredRunRow,
    StoredUpload,
    StoreFull,
    StoreUnavailable,
    checked,
)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id         TEXT PRIMARY KEY,   -- sha256(data)[:16], hex: the upload's id and URL
    sha256     TEXT NOT NULL,      -- the whole hash: a prefix collision is refused, never served
    size       INTEGER NOT NULL,   -- len(bytes): what the quota counts, wherever the bytes are
    filename   TEXT NOT NULL,      -- as first sent; for the operator's listing only
    created_at REAL NOT NULL,      -- unix time
    blob       TEXT,               -- 'blobs/<sha256>' beside this file when kept out of the row, else NULL
    data       BLOB NOT NULL       -- the bytes (empty when in a blob); last, so scans of the columns above skip it
);
CREATE INDEX IF NOT EXISTS {TABLE}_size ON {TABLE} (size);  -- SUM(size) from the index alone
CREATE TABLE IF NOT EXISTS {RUNS_TABLE} (
    id         TEXT PRIMARY KEY,   -- sha256(trainer_state.json)[:16]: the run's id; its file DATA_DIR/runs/<id>.json
    sha256     TEXT NOT NULL,
    size       INTEGER NOT NULL,
    name       TEXT NOT NULL,      -- the file it was read from, for operators
    created_at REAL NOT NULL,
    derived    TEXT                -- JSON {{step: {{name: value}}}} of the numbers read from the run's own files
);
CREATE TABLE IF NOT EXISTS {RUN_RECORDS_TABLE} (
    run_id     TEXT NOT NULL REFERENCES {RUNS_TABLE} (id),
    step       INTEGER NOT NULL,
    upload_id  TEXT NOT NULL,      -- the recorded step's upload (no foreign key: an operator may delete it)
    PRIMARY KEY (run_id, step)
);
"""
SQLITE_FULL = 13
BLOB_NAME = re.compile(rf"{BLOB_DIR}/[0-9a-f]{{64}}\Z")


class SqliteBackend:
    def __init__(self, path: Path, timeout: float = 30.0, inline_max: int = INLINE_MAX) -> None:
        self.path = Path(path)
        self.blobs = self.path.parent / BLOB_DIR
        self.inline_max = inline_max
        self._timeout = timeout
        self._local = threading.local()  # one connection per thread: sqlite3's own rule
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors():
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
            conn.executescript(SCHEMA)
            if not self._has_blob_column(conn):  # a database made before blobs: add the column, once
                with self._transaction() as conn:
                    if not self._has_blob_column(conn):  # another process may have, while we waited
                        conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN blob TEXT")

    @staticmethod
    def _has_blob_column(conn: sqlite3.Connection) -> bool:
        return "blob" in {row[1] for row in conn.execute(f"PRAGMA table_info({TABLE})")}

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
        except OSError as exc:  # a blob file: the disk full, or the folder unwritable
            if exc.errno == errno.ENOSPC:
                raise StoreFull(self.total_bytes_or_zero(), None, 0) from exc
            raise StoreUnavailable(f"sqlite {self.path} (blobs): {exc}") from exc

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The write lock, across processes, for the whole block: committed at its end, else rolled back."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def total_bytes_or_zero(self) -> int:
        try:
            return self.total_bytes()
        except (sqlite3.Error, StoreUnavailable):
            return 0

    # -- blobs -----------------------------------------------------------------------------

    def _write_blob(self, sha256: str, raw: bytes) -> Path:
        """The bytes as `blobs/<sha256>`: written to a temporary name, synced, renamed (never half a file)."""
        self.blobs.mkdir(parents=True, exist_ok=True)
        target = self.blobs / sha256
        fd, tmp = tempfile.mkstemp(dir=self.blobs, prefix=f".{sha256[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(raw)
                out.flush()
                os.fsync(out.fileno())  # as the row is (synchronous=FULL): a 201 means on disk
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def _read_blob(self, name: str, sha256: str, ident: str) -> bytes:
        if not BLOB_NAME.fullmatch(name):
            raise BlobDamaged(f"upload {ident}: its row names no blob of ours ({name[:80]!r})")
        try:
            raw = (self.path.parent / name).read_bytes()  # one buffer of the file's size: no second copy
        except FileNotFoundError:
            raise BlobDamaged(f"upload {ident}: its blob {self.path.parent / name} is missing") from None
        return checked(raw, sha256, f"upload {ident} ({self.path.parent / name})")

    # -- uploads ---------------------------------------------------------------------------

    def put(self, ident: str, sha256: str, raw: bytes, filename: str, limit: int | None) -> bool:
        blob: Path | None = None
        with self._errors():
            try:
                with self._transaction() as conn:  # the write lock before the quota check
                    row = conn.execute(f"SELECT sha256 FROM {TABLE} WHERE id = ?", (ident,)).fetchone()
                    if row is not None:
                        if row[0] != sha256:
                            raise HashCollision(ident)
                        return False
                    used = conn.execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone()[0]
                    if limit is not None and used + len(raw) > limit:
                        raise StoreFull(used, limit, len(raw))
                    if len(raw) > self.inline_max:
                        blob = self._write_blob(sha256, raw)
                    conn.execute(f"INSERT INTO {TABLE} (id, sha256, size, filename, created_at, blob, data) "
                                 "VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 (ident, sha256, len(raw), filename[:FILENAME_MAX], time.time(),
                                  None if blob is None else f"{BLOB_DIR}/{sha256}", b"" if blob else raw))
                return True
            except BaseException:
                if blob is not None:  # no row names it (one row per sha256, and we held the lock)
                    blob.unlink(missing_ok=True)
                raise

    def get(self, ident: str) -> bytes | None:
        with self._errors():
            row = self._conn().execute(f"SELECT sha256, blob, data FROM {TABLE} WHERE id = ?", (ident,)).fetchone()
            if row is None:
                return None
            sha256, blob, data = row
            if blob is not None:
                return self._read_blob(blob, sha256, ident)
        return checked(bytes(data), sha256, f"upload {ident}")

    def exists(self, ident: str) -> bool:
        with self._errors():
            return self._conn().execute(f"SELECT 1 FROM {TABLE} WHERE id = ?", (ident,)).fetchone() is not None

    def total_bytes(self) -> int:
        with self._errors():
            return int(self._conn().execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone()[0])

    def delete(self, ident: str) -> bool:
        with self._errors(), self._transaction() as conn:
            row = conn.execute(f"SELECT blob FROM {TABLE} WHERE id = ?", (ident,)).fetchone()
            if row is None:
                return False
            conn.execute(f"DELETE FROM {TABLE} WHERE id = ?", (ident,))
            if row[0] is not None and BLOB_NAME.fullmatch(row[0]):
                # inside the lock: the same bytes put again by another process wait for this commit
                (self.path.parent / row[0]).unlink(missing_ok=True)
            return True

    def listing(self) -> list[StoredUpload]:
        with self._errors():
            rows = self._conn().execute(
                f"SELECT id, size, filename, created_at FROM {TABLE} ORDER BY created_at, id").fetchall()
        return [StoredUpload(r[0], int(r[1]), r[2], float(r[3])) for r in rows]

    # -- runs (the file itself is DATA_DIR/runs/<id>.json: the row is its reference) ---------

    def put_run(self, ident: str, sha256: str, raw: bytes, name: str, limit: int | None) -> bool:
        with self._errors(), self._transaction() as conn:
            row = conn.execute(f"SELECT sha256 FROM {RUNS_TABLE} WHERE id = ?", (ident,)).fetchone()
            if row is not None:
                if row[0] != sha256:
                    raise HashCollision(ident)
                return False
            used = conn.execute(f"SELECT COALESCE(SUM(size), 0) FROM {RUNS_TABLE}").fetchone()[0]
            if limit is not None and used + len(raw) > limit:
                raise StoreFull(used, limit, len(raw))
            conn.execute(f"INSERT INTO {RUNS_TABLE} (id, sha256, size, name, created_at) VALUES (?, ?, ?, ?, ?)",
                         (ident, sha256, len(raw), name[:FILENAME_MAX], time.time()))
            return True

    def run_sha256(self, ident: str) -> str | None:
        with self._errors():
            row = self._conn().execute(f"SELECT sha256 FROM {RUNS_TABLE} WHERE id = ?", (ident,)).fetchone()
        return None if row is None else str(row[0])

    def run_bytes(self, ident: str) -> bytes | None:
        return None  # one machine: the file in DATA_DIR/runs is the run

    def runs_total(self) -> int:
        with self._errors():
            return int(self._conn().execute(f"SELECT COALESCE(SUM(size), 0) FROM {RUNS_TABLE}").fetchone()[0])

    def run_ids(self) -> set[str]:
        with self._errors():
            return {r[0] for r in self._conn().execute(f"SELECT id FROM {RUNS_TABLE}")}

    def run_listing(self) -> list[StoredRunRow]:
        with self._errors():
            rows = self._conn().execute(f"SELECT id, size, name, created_at FROM {RUNS_TABLE} "
                                        "ORDER BY created_at, id").fetchall()
        return [StoredRunRow(r[0], int(r[1]), r[2], float(r[3])) for r in rows]

    def delete_run(self, ident: str) -> bool:
        with self._errors(), self._transaction() as conn:
            conn.execute(f"DELETE FROM {RUN_RECORDS_TABLE} WHERE run_id = ?", (ident,))
            return conn.execute(f"DELETE FROM {RUNS_TABLE} WHERE id = ?", (ident,)).rowcount > 0

    def link_run_records(self, ident: str, records: dict[int, str]) -> None:
        with self._errors(), self._transaction() as conn:
            conn.executemany(f"INSERT INTO {RUN_RECORDS_TABLE} (run_id, step, upload_id) VALUES (?, ?, ?) "
                             "ON CONFLICT (run_id, step) DO UPDATE SET upload_id = excluded.upload_id",
                             [(ident, int(step), upload) for step, upload in records.items()])

    def run_records(self, ident: str) -> dict[int, str]:
        with self._errors():
            rows = self._conn().execute(f"SELECT step, upload_id FROM {RUN_RECORDS_TABLE} WHERE run_id = ? "
                                        "ORDER BY step", (ident,)).fetchall()
        return {int(step): str(upload) for step, upload in rows}

    def run_derived(self, ident: str) -> str | None:
        with self._errors():
            row = self._conn().execute(f"SELECT derived FROM {RUNS_TABLE} WHERE id = ?", (ident,)).fetchone()
        return None if row is None else row[0]

    def merge_run_derived(self, ident: str, merge: Callable[[str | None], str]) -> None:
        with self._errors(), self._transaction() as conn:
            row = conn.execute(f"SELECT derived FROM {RUNS_TABLE} WHERE id = ?", (ident,)).fetchone()
            if row is None:
                raise KeyError(ident)
            conn.execute(f"UPDATE {RUNS_TABLE} SET derived = ? WHERE id = ?", (merge(row[0]), ident))

    def describe(self) -> str:
        return f"sqlite {self.path} (payloads past {self.inline_max} bytes in {self.blobs})"

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.ProgrammingError:  # made in another thread; closed with the process
                pass
        self._local = threading.local()
