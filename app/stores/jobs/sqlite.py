"""Jobs in SQLite (Python's sqlite3), in the uploads' file: the embedded default.

Every write that decides who holds a job (claim) runs under `BEGIN IMMEDIATE`: SQLite's write
lock, taken before the read, so two processes on one file never claim the same row. The
other writes are single statements guarded by `runner = ?`, atomic by themselves. Clocks are
this machine's (`time.time()`): everyone sharing a SQLite file shares the machine.
"""
from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from app.stores.jobs import (
    ADDED_COLUMNS,
    ANYONE,
    COLUMNS,
    MAX_ATTEMPTS,
    SERVER,
    TABLE,
    WANT_S,
    Ask,
    JobRecord,
    JobSpec,
    QueueFull,
    Whose,
    lost_note,
    promotes,
    record,
    whose_clause,
)
from app.stores.uploads import StoreUnavailable

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id           TEXT PRIMARY KEY,   -- JobSpec.id: sha256 of kind, task, params, code version
    kind         TEXT NOT NULL,
    task         TEXT NOT NULL,
    params       TEXT NOT NULL,      -- JSON, keys sorted
    code_version TEXT NOT NULL,
    device       TEXT NOT NULL,      -- a runner claims only jobs of devices it has
    title        TEXT NOT NULL,
    state        TEXT NOT NULL,      -- queued | running | done | failed
    stage        TEXT NOT NULL DEFAULT 'queued',
    step         INTEGER NOT NULL DEFAULT 0,
    done         INTEGER NOT NULL DEFAULT 0,
    total        INTEGER NOT NULL DEFAULT 0,
    fraction     REAL NOT NULL DEFAULT 0,
    runner       TEXT,               -- host:pid
    attempts     INTEGER NOT NULL DEFAULT 0,
    lease_until  REAL,
    created_at   REAL NOT NULL,
    started_at   REAL,
    finished_at  REAL,
    seconds      REAL,
    error        TEXT,
    history      TEXT NOT NULL DEFAULT '',
    result_size  INTEGER,
    client       TEXT NOT NULL DEFAULT '',  -- who first asked: runners serve clients in turn
    keep         INTEGER NOT NULL DEFAULT 0,  -- 1: stays queued though nobody reads it
    wanted_until REAL,               -- queued, not kept and unread past this: expired (deleted)
    result       BLOB                -- last, so scans of the columns above skip the bytes
);
CREATE INDEX IF NOT EXISTS {TABLE}_claimable ON {TABLE} (state, created_at);
"""
INDEXES = f"CREATE INDEX IF NOT EXISTS {TABLE}_served ON {TABLE} (client, started_at);"
SELECT = f"SELECT {', '.join(COLUMNS)} FROM {TABLE}"
# The claimable rows in the order runners take them: a lapsed running job first (it was started), then
# the queued ones round-robin over clients: fewest jobs running first (`turn`: a client's running jobs
# take its first turns), then the client served longest ago (`served`: its last claim; never served
# first), then the oldest.
NEXT = f"""
SELECT q.id, q.state, q.runner FROM (
    SELECT id, state, runner, task, device, code_version, lease_until, created_at, client,
           ROW_NUMBER() OVER (PARTITION BY client ORDER BY state = 'running' DESC, created_at) AS turn
    FROM {TABLE} WHERE state IN ('queued', 'running')) AS q
LEFT JOIN (SELECT client, MAX(started_at) AS served FROM {TABLE} GROUP BY client) AS s ON s.client = q.client
WHERE q.task IN ({{tasks}}) AND q.device IN ({{devices}}) AND q.code_version = ?{{whose}}
  AND (q.state = 'queued' OR (q.state = 'running' AND q.lease_until < ?))
ORDER BY q.state = 'running' DESC, q.turn, COALESCE(s.served, 0), q.created_at LIMIT 1
"""
EXPIRE = f"DELETE FROM {TABLE} WHERE state = 'queued' AND keep = 0 AND (wanted_until IS NULL OR wanted_until < ?)"


class SqliteJobBackend:
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._timeout = timeout
        self._local = threading.local()  # one connection per thread: sqlite3's own rule
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors():
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({TABLE})")}
            for name, decl in ADDED_COLUMNS:  # a file an older version made
                if name not in have:
                    conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {name} {decl}")
            conn.execute(INDEXES)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at each checkpoint, never corrupt
            self._local.conn = conn
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"sqlite {self.path}: {exc}") from exc

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        with self._errors():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def ensure(self, spec: JobSpec, ask: Ask = ANYONE) -> JobRecord:
        now = time.time()
        with self._immediate() as conn:  # the count and the insert under one write lock: the bound holds
            known = conn.execute(f"SELECT state FROM {TABLE} WHERE id = ?", (spec.id,)).fetchone()
            if known is None:
                if ask.max_queued is not None:
                    queued = conn.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state = 'queued'").fetchone()[0]
                    if queued >= ask.max_queued:
                        raise QueueFull(queued, ask.max_queued)
                conn.execute(f"INSERT INTO {TABLE} (id, kind, task, params, code_version, device, title, state, "
                             "created_at, client, keep, wanted_until) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                             (spec.id, spec.kind, spec.task, spec.params_json, spec.code_version, spec.device,
                              spec.title, now, ask.client, int(ask.keep), now + ask.want_s))
            elif known[0] == "queued":
                conn.execute(f"UPDATE {TABLE} SET keep = MAX(keep, ?), "
                             "wanted_until = MAX(COALESCE(wanted_until, 0), ?) WHERE id = ?",
                             (int(ask.keep), now + ask.want_s, spec.id))
                if promotes(ask):
                    conn.execute(f"UPDATE {TABLE} SET client = ? WHERE id = ? AND client = ?",
                                 (ask.client, spec.id, SERVER))
            found = conn.execute(f"{SELECT} WHERE id = ?", (spec.id,)).fetchone()
        return record(found)

    def touch(self, ident: str, want_s: float = WANT_S) -> None:
        with self._errors():
            self._conn().execute(f"UPDATE {TABLE} SET wanted_until = MAX(COALESCE(wanted_until, 0), ?) "
                                 "WHERE id = ? AND state = 'queued'", (time.time() + want_s, ident))

    def queued(self) -> int:
        with self._errors():
            return int(self._conn().execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state = 'queued'").fetchone()[0])

    def get(self, ident: str) -> JobRecord | None:
        with self._errors():
            row = self._conn().execute(f"{SELECT} WHERE id = ?", (ident,)).fetchone()
        return None if row is None else record(row)

    def result(self, ident: str) -> bytes | None:
        with self._errors():
            row = self._conn().execute(f"SELECT result FROM {TABLE} WHERE id = ? AND state = 'done'",
                                       (ident,)).fetchone()
        return None if row is None or row[0] is None else bytes(row[0])

    def claim(self, runner: str, lease_s: float, tasks: Sequence[str], devices: Sequence[str],
              code_version: str, whose: Whose = "any") -> JobRecord | None:
        now = time.time()
        marks = ", ".join("?" * len(tasks))
        dev_marks = ", ".join("?" * len(devices))
        with self._immediate() as conn:
            conn.execute(f"UPDATE {TABLE} SET state = 'failed', finished_at = ?, lease_until = NULL, "
                         "error = 'its runner was lost ' || attempts || ' times (killed or crashed mid-run); "
                         "not handed on again' WHERE state = 'running' AND lease_until < ? AND attempts >= ?",
                         (now, now, MAX_ATTEMPTS))
            conn.execute(EXPIRE, (now,))
            who = () if whose == "any" else (SERVER,)
            row = conn.execute(NEXT.format(tasks=marks, devices=dev_marks, whose=whose_clause(whose, "q.client", "?")),
                               (*tasks, *devices, code_version, *who, now)).fetchone()
            if row is None:
                return None
            note = lost_note(row[2], now) if row[1] == "running" else ""
            conn.execute(f"UPDATE {TABLE} SET state = 'running', wanted_until = NULL, runner = ?, "
                         "attempts = attempts + 1, lease_until = ?, started_at = ?, history = history || ? "
                         "WHERE id = ?",
                         (runner, now + lease_s, now, note, row[0]))
            found = conn.execute(f"{SELECT} WHERE id = ?", (row[0],)).fetchone()
        return record(found)

    def heartbeat(self, ident: str, runner: str, lease_s: float, stage: str, step: int, done: int,
                  total: int) -> bool:
        fraction = done / total if total else 0.0
        with self._errors():
            cur = self._conn().execute(
                f"UPDATE {TABLE} SET lease_until = :lease, "
                "stage = CASE WHEN :f >= fraction THEN :stage ELSE stage END, "
                "step = CASE WHEN :f >= fraction THEN :step ELSE step END, "
                "done = CASE WHEN :f >= fraction THEN :done ELSE done END, "
                "total = CASE WHEN :f >= fraction THEN :total ELSE total END, "
                "fraction = MAX(fraction, :f) WHERE id = :id AND runner = :runner AND state = 'running'",
                {"lease": time.time() + lease_s, "f": fraction, "stage": stage, "step": step, "done": done,
                 "total": total, "id": ident, "runner": runner})
        return cur.rowcount > 0

    def finish(self, ident: str, runner: str, result: bytes, seconds: float) -> bool:
        with self._errors():
            cur = self._conn().execute(
                f"UPDATE {TABLE} SET state = 'done', stage = 'done', fraction = 1, done = total, result = ?, "
                "result_size = ?, finished_at = ?, seconds = ?, lease_until = NULL, error = NULL "
                "WHERE id = ? AND runner = ? AND state = 'running'",
                (result, len(result), time.time(), seconds, ident, runner))
        return cur.rowcount > 0

    def fail(self, ident: str, runner: str, error: str) -> bool:
        with self._errors():
            cur = self._conn().execute(
                f"UPDATE {TABLE} SET state = 'failed', error = ?, finished_at = ?, lease_until = NULL "
                "WHERE id = ? AND runner = ? AND state = 'running'", (error, time.time(), ident, runner))
        return cur.rowcount > 0

    def release(self, ident: str, runner: str) -> bool:
        with self._errors():
            cur = self._conn().execute(
                f"UPDATE {TABLE} SET state = 'queued', runner = NULL, lease_until = NULL, wanted_until = ?, "
                "history = history || ? WHERE id = ? AND runner = ? AND state = 'running'",
                (time.time() + WANT_S, f"runner {runner} stopped at {time.time():.0f}; handed back\n", ident, runner))
        return cur.rowcount > 0

    def retry(self, ident: str) -> bool:
        with self._errors():
            cur = self._conn().execute(
                f"UPDATE {TABLE} SET state = 'queued', stage = 'queued', step = 0, done = 0, total = 0, "
                "fraction = 0, runner = NULL, attempts = 0, error = NULL, started_at = NULL, finished_at = NULL, "
                "seconds = NULL, created_at = ?, wanted_until = ? WHERE id = ? AND state = 'failed'",
                (time.time(), time.time() + WANT_S, ident))
        return cur.rowcount > 0

    def delete(self, ident: str) -> bool:
        with self._errors():
            return self._conn().execute(f"DELETE FROM {TABLE} WHERE id = ?", (ident,)).rowcount > 0

    def listing(self) -> list[JobRecord]:
        with self._errors():
            rows = self._conn().execute(f"{SELECT} ORDER BY created_at, id").fetchall()
        return [record(r) for r in rows]

    def describe(self) -> str:
        return f"sqlite {self.path}"

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local = threading.local()
