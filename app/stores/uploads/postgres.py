"""Uploads in PostgreSQL (psycopg 3): one table shared by every replica.

A few connections per process, made when first needed and reused; a broken one (a server
restart) is dropped and the operation tried once more on a new one. Each insert takes a
transaction-scoped advisory lock, so the quota check and the insert are one step for every
replica at once.

A payload past `inline_max` bytes is a large object (written `LO_CHUNK` bytes per statement in the
insert's transaction; its row's `lo` names it, its `data` is empty), read back the same way and checked
against the row's sha256; deleting the row unlinks it in the same transaction. A run's bytes are always a
large object: another replica, with a data directory of its own, opens the run from it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from app.stores.uploads import (
    FILENAME_MAX,
    INLINE_MAX,
    LO_CHUNK,
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
    id         text PRIMARY KEY,                    -- sha256(data)[:16], hex: the upload's id and URL
    sha256     text NOT NULL,                       -- the whole hash: a prefix collision is refused
    size       integer NOT NULL,                    -- the bytes' length, wherever they are: what the quota counts
    filename   text NOT NULL,                       -- as first sent; for the operator's listing only
    created_at timestamptz NOT NULL DEFAULT now(),
    lo         oid,                                 -- the large object holding the bytes past INLINE_MAX, else NULL
    data       bytea NOT NULL                       -- the bytes (empty when in a large object)
);
ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS lo oid;  -- a table made before large objects
CREATE INDEX IF NOT EXISTS {TABLE}_size ON {TABLE} (size);
CREATE TABLE IF NOT EXISTS {RUNS_TABLE} (
    id         text PRIMARY KEY,                    -- sha256(trainer_state.json)[:16]: the run's id
    sha256     text NOT NULL,
    size       bigint NOT NULL,
    name       text NOT NULL,                       -- the file it was read from, for operators
    created_at timestamptz NOT NULL DEFAULT now(),
    lo         oid NOT NULL,                        -- its bytes, so every replica opens it
    derived    text                                 -- JSON {{step: {{name: value}}}} read from the run's own files
);
CREATE TABLE IF NOT EXISTS {RUN_RECORDS_TABLE} (
    run_id     text NOT NULL REFERENCES {RUNS_TABLE} (id),
    step       bigint NOT NULL,
    upload_id  text NOT NULL,                       -- no foreign key: an operator may delete the upload
    PRIMARY KEY (run_id, step)
);
"""
# pg_advisory_xact_lock key: every replica's inserts (and the schema set-up) queue on it.
LOCK_KEY = 0x6772706F75706C  # "grpoupl"
T = TypeVar("T")


def _redacted(url: str) -> str:
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql (unparsable DATABASE_URL)"
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    return f"postgresql {info.get('user') or ''}@{host}:{port}/{info.get('dbname') or ''}"


class PgConnections:
    """A few reused connections to one server; shared by the upload and the job stores."""

    def __init__(self, url: str, pool_size: int = 4, connect_timeout: int = 10) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("DATABASE_URL must start with postgresql:// (got another scheme)")
        self._url = url
        self._where = _redacted(url)
        self._connect_timeout = connect_timeout
        self._idle: list[psycopg.Connection[Any]] = []
        self._slots = threading.BoundedSemaphore(pool_size)
        self._lock = threading.Lock()

    # -- connections -----------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in conninfo_to_dict(self._url):
            kwargs["connect_timeout"] = self._connect_timeout
        return psycopg.connect(self._url, **kwargs)

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if not self._slots.acquire(timeout=30):
            raise StoreUnavailable(f"{self._where}: every connection busy for 30 s")
        conn = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                conn = self._connect()
            yield conn
        finally:
            if conn is not None:
                if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    with self._lock:
                        self._idle.append(conn)
                else:
                    conn.close()
            self._slots.release()

    def _run(self, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        for attempt in (1, 2):
            try:
                with self._connection() as conn:
                    return op(conn)
            except psycopg.OperationalError as exc:  # a dropped connection: once more on a new one
                if attempt == 2:
                    raise StoreUnavailable(f"{self._where}: {exc}") from exc
            except psycopg.Error as exc:
                raise StoreUnavailable(f"{self._where}: {exc}") from exc
        raise AssertionError("unreachable")

    def describe(self) -> str:
        return self._where

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _lo_write(conn: psycopg.Connection[Any], raw: bytes) -> int:
    """A new large object holding `raw` (inside the caller's transaction); its oid."""
    view = memoryview(raw)
    row = conn.execute("SELECT lo_from_bytea(0, %s)", (view[:LO_CHUNK],)).fetchone()
    oid = int(row[0])  # type: ignore[index]
    for offset in range(LO_CHUNK, len(raw), LO_CHUNK):
        conn.execute("SELECT lo_put(%s, %s, %s)", (oid, offset, view[offset:offset + LO_CHUNK]))
    return oid


def _lo_read(conn: psycopg.Connection[Any], oid: int, size: int, sha256: str, what: str) -> bytes:
    """The large object's bytes, read in chunks (inside the caller's snapshot), checked against `sha256`."""
    chunks: list[bytes] = []
    try:
        with conn.transaction():  # a savepoint: a missing object is our error, not the transaction's end
            for offset in range(0, max(size, 1), LO_CHUNK):
                row = conn.execute("SELECT lo_get(%s, %s, %s)", (oid, offset, LO_CHUNK), binary=True).fetchone()
                chunks.append(bytes(row[0]))  # type: ignore[index]
    except psycopg.errors.UndefinedObject:
        raise BlobDamaged(f"{what}: its large object {oid} is missing") from None
    raw = b"".join(chunks)
    chunks.clear()
    return checked(raw, sha256, f"{what} (large object {oid})")


@contextmanager
def _snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One snapshot for a row and its large object's chunks: an operator's delete in between is not seen."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


class PostgresBackend(PgConnections):
    def __init__(self, url: str, pool_size: int = 4, connect_timeout: int = 10, inline_max: int = INLINE_MAX) -> None:
        super().__init__(url, pool_size, connect_timeout)
        self.inline_max = inline_max
        self._run(self._create_schema)  # fails start-up at once if the server cannot be reached

    # -- the interface ---------------------------------------------------------------------

    @staticmethod
    def _create_schema(conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))  # replicas start at once
            conn.execute(SCHEMA)

    def put(self, ident: str, sha256: str, raw: bytes, filename: str, limit: int | None) -> bool:
        def op(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                row = conn.execute(f"SELECT sha256 FROM {TABLE} WHERE id = %s", (ident,)).fetchone()
                if row is not None:
                    if row[0] != sha256:
                        raise HashCollision(ident)
                    return False
                used = int(conn.execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone()[0])  # type: ignore[index]
                if limit is not None and used + len(raw) > limit:
                    raise StoreFull(used, limit, len(raw))
                lo = _lo_write(conn, raw) if len(raw) > self.inline_max else None
                conn.execute(f"INSERT INTO {TABLE} (id, sha256, size, filename, lo, data) "
                             "VALUES (%s, %s, %s, %s, %s, %s)",
                             (ident, sha256, len(raw), filename[:FILENAME_MAX], lo, b"" if lo is not None else raw))
                return True
        return self._run(op)

    def get(self, ident: str) -> bytes | None:
        def op(conn: psycopg.Connection[Any]) -> bytes | None:
            with _snapshot(conn):
                row = conn.execute(f"SELECT sha256, size, lo, data FROM {TABLE} WHERE id = %s", (ident,),
                                   binary=True).fetchone()  # binary: bytea as itself, not twice its size in hex
                if row is None:
                    return None
                sha256, size, lo, data = row
                if lo is not None:
                    return _lo_read(conn, int(lo), int(size), sha256, f"upload {ident}")
            return checked(bytes(data), sha256, f"upload {ident}")
        return self._run(op)

    def exists(self, ident: str) -> bool:
        return self._run(lambda c: c.execute(f"SELECT 1 FROM {TABLE} WHERE id = %s", (ident,)).fetchone()) is not None

    def total_bytes(self) -> int:
        row = self._run(lambda c: c.execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone())
        return int(row[0]) if row else 0

    def delete(self, ident: str) -> bool:
        def op(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                row = conn.execute(f"DELETE FROM {TABLE} WHERE id = %s RETURNING lo", (ident,)).fetchone()
                if row is not None and row[0] is not None:
                    conn.execute("SELECT lo_unlink(%s) FROM pg_largeobject_metadata WHERE oid = %s", (row[0], row[0]))
                return row is not None
        return self._run(op)

    def listing(self) -> list[StoredUpload]:
        query = f"SELECT id, size, filename, extract(epoch FROM created_at) FROM {TABLE} ORDER BY created_at, id"
        rows = self._run(lambda c: c.execute(query).fetchall())
        return [StoredUpload(r[0], int(r[1]), r[2], float(r[3])) for r in rows]

    # -- runs ------------------------------------------------------------------------------

    def put_run(self, ident: str, sha256: str, raw: bytes, name: str, limit: int | None) -> bool:
        def op(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                row = conn.execute(f"SELECT sha256 FROM {RUNS_TABLE} WHERE id = %s", (ident,)).fetchone()
                if row is not None:
                    if row[0] != sha256:
                        raise HashCollision(ident)
                    return False
                used = int(conn.execute(f"SELECT COALESCE(SUM(size), 0) FROM {RUNS_TABLE}").fetchone()[0])  # type: ignore[index]
                if limit is not None and used + len(raw) > limit:
                    raise StoreFull(used, limit, len(raw))
                conn.execute(f"INSERT INTO {RUNS_TABLE} (id, sha256, size, name, lo) VALUES (%s, %s, %s, %s, %s)",
                             (ident, sha256, len(raw), name[:FILENAME_MAX], _lo_write(conn, raw)))
                return True
        return self._run(op)

    def run_sha256(self, ident: str) -> str | None:
        row = self._run(lambda c: c.execute(f"SELECT sha256 FROM {RUNS_TABLE} WHERE id = %s", (ident,)).fetchone())
        return None if row is None else str(row[0])

    def run_bytes(self, ident: str) -> bytes | None:
        def op(conn: psycopg.Connection[Any]) -> bytes | None:
            with _snapshot(conn):
                row = conn.execute(f"SELECT sha256, size, lo FROM {RUNS_TABLE} WHERE id = %s", (ident,)).fetchone()
                return None if row is None else _lo_read(conn, int(row[2]), int(row[1]), row[0], f"run {ident}")
        return self._run(op)

    def runs_total(self) -> int:
        row = self._run(lambda c: c.execute(f"SELECT COALESCE(SUM(size), 0) FROM {RUNS_TABLE}").fetchone())
        return int(row[0]) if row else 0

    def run_ids(self) -> set[str]:
        return {r[0] for r in self._run(lambda c: c.execute(f"SELECT id FROM {RUNS_TABLE}").fetchall())}

    def run_listing(self) -> list[StoredRunRow]:
        query = f"SELECT id, size, name, extract(epoch FROM created_at) FROM {RUNS_TABLE} ORDER BY created_at, id"
        rows = self._run(lambda c: c.execute(query).fetchall())
        return [StoredRunRow(r[0], int(r[1]), r[2], float(r[3])) for r in rows]

    def delete_run(self, ident: str) -> bool:
        def op(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                conn.execute(f"DELETE FROM {RUN_RECORDS_TABLE} WHERE run_id = %s", (ident,))
                row = conn.execute(f"DELETE FROM {RUNS_TABLE} WHERE id = %s RETURNING lo", (ident,)).fetchone()
                if row is not None and row[0] is not None:
                    conn.execute("SELECT lo_unlink(%s) FROM pg_largeobject_metadata WHERE oid = %s", (row[0], row[0]))
                return row is not None
        return self._run(op)

    def link_run_records(self, ident: str, records: dict[int, str]) -> None:
        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {RUN_RECORDS_TABLE} (run_id, step, upload_id) VALUES (%s, %s, %s) "
                                "ON CONFLICT (run_id, step) DO UPDATE SET upload_id = excluded.upload_id",
                                [(ident, int(step), upload) for step, upload in records.items()])
        self._run(op)

    def run_records(self, ident: str) -> dict[int, str]:
        rows = self._run(lambda c: c.execute(f"SELECT step, upload_id FROM {RUN_RECORDS_TABLE} WHERE run_id = %s "
                                             "ORDER BY step", (ident,)).fetchall())
        return {int(step): str(upload) for step, upload in rows}

    def run_derived(self, ident: str) -> str | None:
        row = self._run(lambda c: c.execute(f"SELECT derived FROM {RUNS_TABLE} WHERE id = %s", (ident,)).fetchone())
        return None if row is None else row[0]

    def merge_run_derived(self, ident: str, merge: Callable[[str | None], str]) -> None:
        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                row = conn.execute(f"SELECT derived FROM {RUNS_TABLE} WHERE id = %s FOR UPDATE", (ident,)).fetchone()
                if row is None:
                    raise KeyError(ident)
                conn.execute(f"UPDATE {RUNS_TABLE} SET derived = %s WHERE id = %s", (merge(row[0]), ident))
        self._run(op)
