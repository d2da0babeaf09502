"""Jobs in PostgreSQL (psycopg 3): one table shared by every replica and worker machine.

A claim is one statement: `UPDATE … WHERE id = (SELECT id … FOR UPDATE SKIP LOCKED LIMIT 1)`.
Two runners asking at once lock different rows (or one finds none) instead of queueing on the
same one, which is the lock PostgreSQL's own documentation names for a queue table. Every time
is the server's clock (`clock_timestamp()`), so leases hold across machines whose clocks differ.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from app.stores.jobs import (
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
    promotes,
    record,
    whose_clause,
)
from app.stores.uploads.postgres import LOCK_KEY, PgConnections

NOW = "extract(epoch FROM clock_timestamp())"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id           text PRIMARY KEY,
    kind         text NOT NULL,
    task         text NOT NULL,
    params       text NOT NULL,
    code_version text NOT NULL,
    device       text NOT NULL,
    title        text NOT NULL,
    state        text NOT NULL,
    stage        text NOT NULL DEFAULT 'queued',
    step         integer NOT NULL DEFAULT 0,
    done         integer NOT NULL DEFAULT 0,
    total        integer NOT NULL DEFAULT 0,
    fraction     double precision NOT NULL DEFAULT 0,
    runner       text,
    attempts     integer NOT NULL DEFAULT 0,
    lease_until  double precision,
    created_at   double precision NOT NULL,
    started_at   double precision,
    finished_at  double precision,
    seconds      double precision,
    error        text,
    history      text NOT NULL DEFAULT '',
    result_size  integer,
    result       bytea
);
CREATE INDEX IF NOT EXISTS {TABLE}_claimable ON {TABLE} (state, created_at);
ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS client text NOT NULL DEFAULT '';
ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS keep integer NOT NULL DEFAULT 0;
ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS wanted_until double precision;
CREATE INDEX IF NOT EXISTS {TABLE}_served ON {TABLE} (client, started_at);
"""
EXPIRE = (f"DELETE FROM {TABLE} WHERE state = 'queued' AND keep = 0 "
          f"AND (wanted_until IS NULL OR wanted_until < {NOW})")
# As in SQLite (sqlite.NEXT): a lapsed running job first, then the clients' queued jobs round-robin;
# the window and the grouping run in subqueries, so the row lock (FOR UPDATE OF j SKIP LOCKED) is on
# the table's rows alone.
NEXT = (f"SELECT j.id FROM {TABLE} AS j JOIN (SELECT id, ROW_NUMBER() OVER (PARTITION BY client "
        "ORDER BY state = 'running' DESC, created_at) AS turn "
        f"FROM {TABLE} WHERE state IN ('queued', 'running')) AS t ON t.id = j.id "
        f"LEFT JOIN (SELECT client, MAX(started_at) AS served FROM {TABLE} GROUP BY client) AS s "
        "ON s.client = j.client "
        "WHERE j.task = ANY(%(tasks)s) AND j.device = ANY(%(devices)s) AND j.code_version = %(code)s{whose} "
        f"AND (j.state = 'queued' OR (j.state = 'running' AND j.lease_until < {NOW})) "
        "ORDER BY j.state = 'running' DESC, t.turn, COALESCE(s.served, 0), j.created_at "
        "LIMIT 1 FOR UPDATE OF j SKIP LOCKED")
SELECT = f"SELECT {', '.join(COLUMNS)} FROM {TABLE}"
Conn = psycopg.Connection[Any]


class PostgresJobBackend(PgConnections):
    def __init__(self, url: str, pool_size: int = 4, connect_timeout: int = 10) -> None:
        super().__init__(url, pool_size, connect_timeout)
        self._run(self._create_schema)

    @staticmethod
    def _create_schema(conn: Conn) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))  # replicas start at once
            conn.execute(SCHEMA)

    def ensure(self, spec: JobSpec, ask: Ask = ANYONE) -> JobRecord:
        def op(conn: Conn) -> Any:
            with conn.transaction():
                known = conn.execute(f"SELECT state FROM {TABLE} WHERE id = %s", (spec.id,)).fetchone()
                if known is None:
                    if ask.max_queued is not None:
                        # Under concurrent inserts from other replicas the bound may be passed by as many
                        # rows as there are inserts at once (READ COMMITTED): a bound, not an exact count.
                        count = conn.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state = 'queued'").fetchone()
                        queued = int(count[0]) if count else 0
                        if queued >= ask.max_queued:
                            raise QueueFull(queued, ask.max_queued)
                    conn.execute(f"INSERT INTO {TABLE} (id, kind, task, params, code_version, device, title, state, "
                                 f"created_at, client, keep, wanted_until) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                                 f"'queued', {NOW}, %s, %s, {NOW} + %s) ON CONFLICT (id) DO NOTHING",
                                 (spec.id, spec.kind, spec.task, spec.params_json, spec.code_version, spec.device,
                                  spec.title, ask.client, int(ask.keep), ask.want_s))
                elif known[0] == "queued":
                    conn.execute(f"UPDATE {TABLE} SET keep = GREATEST(keep, %s), "
                                 f"wanted_until = GREATEST(COALESCE(wanted_until, 0), {NOW} + %s) WHERE id = %s",
                                 (int(ask.keep), ask.want_s, spec.id))
                    if promotes(ask):
                        conn.execute(f"UPDATE {TABLE} SET client = %s WHERE id = %s AND client = %s",
                                     (ask.client, spec.id, SERVER))
                return conn.execute(f"{SELECT} WHERE id = %s", (spec.id,)).fetchone()
        row = self._run(op)
        return record(row) if row is not None else self.ensure(spec, ask)

    def touch(self, ident: str, want_s: float = WANT_S) -> None:
        self._run(lambda c: c.execute(f"UPDATE {TABLE} SET wanted_until = GREATEST(COALESCE(wanted_until, 0), "
                                      f"{NOW} + %s) WHERE id = %s AND state = 'queued'", (want_s, ident)))

    def queued(self) -> int:
        row = self._run(lambda c: c.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE state = 'queued'").fetchone())
        return int(row[0]) if row else 0

    def get(self, ident: str) -> JobRecord | None:
        row = self._run(lambda c: c.execute(f"{SELECT} WHERE id = %s", (ident,)).fetchone())
        return None if row is None else record(row)

    def result(self, ident: str) -> bytes | None:
        row = self._run(lambda c: c.execute(f"SELECT result FROM {TABLE} WHERE id = %s AND state = 'done'",
                                            (ident,)).fetchone())
        return None if row is None or row[0] is None else bytes(row[0])

    def claim(self, runner: str, lease_s: float, tasks: Sequence[str], devices: Sequence[str],
              code_version: str, whose: Whose = "any") -> JobRecord | None:
        nxt = NEXT.replace("{whose}", whose_clause(whose, "j.client", "%(server)s"))
        def op(conn: Conn) -> Any:
            with conn.transaction():
                conn.execute(f"UPDATE {TABLE} SET state = 'failed', finished_at = {NOW}, lease_until = NULL, "
                             "error = 'its runner was lost ' || attempts || ' times (killed or crashed mid-run); "
                             f"not handed on again' WHERE state = 'running' AND lease_until < {NOW} "
                             "AND attempts >= %s", (MAX_ATTEMPTS,))
                conn.execute(EXPIRE)
                return conn.execute(
                    f"UPDATE {TABLE} AS j SET state = 'running', wanted_until = NULL, runner = %(runner)s, "
                    "attempts = j.attempts + 1, "
                    f"lease_until = {NOW} + %(lease)s, started_at = {NOW}, "
                    "history = j.history || CASE WHEN j.state = 'running' THEN 'runner ' || COALESCE(j.runner, '?') "
                    f"|| ' lost its lease at ' || round({NOW}) || '; taken over' || chr(10) ELSE '' END "
                    f"FROM ({nxt}) AS next "
                    f"WHERE j.id = next.id RETURNING {', '.join('j.' + c for c in COLUMNS)}",
                    {"runner": runner, "lease": lease_s, "tasks": list(tasks), "devices": list(devices),
                     "code": code_version, "server": SERVER}).fetchone()
        row = self._run(op)
        return None if row is None else record(row)

    def heartbeat(self, ident: str, runner: str, lease_s: float, stage: str, step: int, done: int,
                  total: int) -> bool:
        params = {"lease": lease_s, "f": done / total if total else 0.0, "stage": stage, "step": step,
                  "done": done, "total": total, "id": ident, "runner": runner}
        query = (f"UPDATE {TABLE} SET lease_until = {NOW} + %(lease)s, "
                 "stage = CASE WHEN %(f)s >= fraction THEN %(stage)s ELSE stage END, "
                 "step = CASE WHEN %(f)s >= fraction THEN %(step)s ELSE step END, "
                 "done = CASE WHEN %(f)s >= fraction THEN %(done)s ELSE done END, "
                 "total = CASE WHEN %(f)s >= fraction THEN %(total)s ELSE total END, "
                 "fraction = GREATEST(fraction, %(f)s) WHERE id = %(id)s AND runner = %(runner)s AND state = 'running'")
        return self._run(lambda c: c.execute(query, params).rowcount) > 0

    def finish(self, ident: str, runner: str, result: bytes, seconds: float) -> bool:
        query = (f"UPDATE {TABLE} SET state = 'done', stage = 'done', fraction = 1, done = total, result = %s, "
                 f"result_size = %s, finished_at = {NOW}, seconds = %s, lease_until = NULL, error = NULL "
                 "WHERE id = %s AND runner = %s AND state = 'running'")
        return self._run(lambda c: c.execute(query, (result, len(result), seconds, ident, runner)).rowcount) > 0

    def fail(self, ident: str, runner: str, error: str) -> bool:
        query = (f"UPDATE {TABLE} SET state = 'failed', error = %s, finished_at = {NOW}, lease_until = NULL "
                 "WHERE id = %s AND runner = %s AND state = 'running'")
        return self._run(lambda c: c.execute(query, (error, ident, runner)).rowcount) > 0

    def release(self, ident: str, runner: str) -> bool:
        query = (f"UPDATE {TABLE} SET state = 'queued', runner = NULL, lease_until = NULL, "
                 f"wanted_until = {NOW} + {WANT_S}, "
                 f"history = history || 'runner ' || %s || ' stopped at ' || round({NOW}) || '; handed back' "
                 "|| chr(10) WHERE id = %s AND runner = %s AND state = 'running'")
        return self._run(lambda c: c.execute(query, (runner, ident, runner)).rowcount) > 0

    def retry(self, ident: str) -> bool:
        query = (f"UPDATE {TABLE} SET state = 'queued', stage = 'queued', step = 0, done = 0, total = 0, "
                 "fraction = 0, runner = NULL, attempts = 0, error = NULL, started_at = NULL, finished_at = NULL, "
                 f"seconds = NULL, created_at = {NOW}, wanted_until = {NOW} + {WANT_S} "
                 "WHERE id = %s AND state = 'failed'")
        return self._run(lambda c: c.execute(query, (ident,)).rowcount) > 0

    def delete(self, ident: str) -> bool:
        return self._run(lambda c: c.execute(f"DELETE FROM {TABLE} WHERE id = %s", (ident,)).rowcount) > 0

    def listing(self) -> list[JobRecord]:
        rows = self._run(lambda c: c.execute(f"{SELECT} ORDER BY created_at, id").fetchall())
        return [record(r) for r in rows]
