"""Uploads in PostgreSQL (psycopg 3): one table shared by every replica.

A few connections per process, made when first needed and reused; a broken one (a server
restart) is dropped and the operation tried once more on a new one. Each insert takes a
transaction-scoped advisory lock, so the quota check and the insert are one step for every
replica at once.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from app.stores.uploads import FILENAME_MAX, TABLE, HashCollision, StoredUpload, StoreFull, StoreUnavailable

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id         text PRIMARY KEY,                    -- sha256(data)[:16], hex: the upload's id and URL
    sha256     text NOT NULL,                       -- the whole hash: a prefix collision is refused
    size       integer NOT NULL,                    -- octet_length(data): what the quota counts
    filename   text NOT NULL,                       -- as first sent; for the operator's listing only
    created_at timestamptz NOT NULL DEFAULT now(),
    data       bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS {TABLE}_size ON {TABLE} (size);
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


class PostgresBackend(PgConnections):
    def __init__(self, url: str, pool_size: int = 4, connect_timeout: int = 10) -> None:
        super().__init__(url, pool_size, connect_timeout)
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
                conn.execute(f"INSERT INTO {TABLE} (id, sha256, size, filename, data) VALUES (%s, %s, %s, %s, %s)",
                             (ident, sha256, len(raw), filename[:FILENAME_MAX], raw))
                return True
        return self._run(op)

    def get(self, ident: str) -> bytes | None:
        row = self._run(lambda c: c.execute(f"SELECT data FROM {TABLE} WHERE id = %s", (ident,)).fetchone())
        return None if row is None else bytes(row[0])

    def exists(self, ident: str) -> bool:
        return self._run(lambda c: c.execute(f"SELECT 1 FROM {TABLE} WHERE id = %s", (ident,)).fetchone()) is not None

    def total_bytes(self) -> int:
        row = self._run(lambda c: c.execute(f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}").fetchone())
        return int(row[0]) if row else 0

    def delete(self, ident: str) -> bool:
        return self._run(lambda c: c.execute(f"DELETE FROM {TABLE} WHERE id = %s", (ident,)).rowcount > 0)

    def listing(self) -> list[StoredUpload]:
        query = f"SELECT id, size, filename, extract(epoch FROM created_at) FROM {TABLE} ORDER BY created_at, id"
        rows = self._run(lambda c: c.execute(query).fetchall())
        return [StoredUpload(r[0], int(r[1]), r[2], float(r[3])) for r in rows]
