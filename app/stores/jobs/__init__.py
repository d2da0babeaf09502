"""Training runs as rows: one small interface, two implementations, beside the uploads.

A job is what a path request asks for, named by its content: `JobSpec.id` hashes the kind, the
task, its parameters and the code version, so the same request from any worker or replica
finds the same row. The row carries the whole life of the run: queued, claimed by one runner
(a lease it renews with a heartbeat), its progress, then the result bytes or the error.

- `SqliteJobBackend` (the default): the same SQLite file as the uploads, claims under
  `BEGIN IMMEDIATE` (the file's write lock, across processes).
- `PostgresJobBackend` (DATABASE_URL): claims with `SELECT … FOR UPDATE SKIP LOCKED`, so
  replicas and workers on other machines never claim the same row, nor wait on each other.

Who asked, and on what terms (`Ask`), is stored with the row, so the queue is fair and bounded
(docs/explanation/jobs.md, "A fair, bounded queue"): runners take the clients' queued jobs in
turn (a client's n-th job waits behind every other client's first); a queued job nobody has read
for `want_s` seconds, and nobody asked to keep, expires (its row is deleted) instead of running
for no one, after a restart too; and a new row past `max_queued` queued ones is refused.

Nothing here knows torch or a kind: results are bytes, parameters JSON.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

TABLE = "grpo_jobs"
STATES = ("queued", "running", "done", "failed")
# A job whose runner was lost this many times is failed, not handed on again: a job that kills
# its runner (memory, a segfault) must not take every runner down in turn.
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class JobSpec:
    kind: str  # the id of the walkthrough kind whose task this is
    task: str  # the task's name in that kind
    params: dict[str, Any]  # JSON: path, seed, device and the kind's own parameters
    code_version: str  # what computes it: a new version is a new job
    title: str = ""  # for listings: "<kind> r1-zero seed 3 (cpu)"

    @property
    def device(self) -> str:
        return str(self.params.get("device", "cpu"))

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True, separators=(",", ":"))

    @property
    def id(self) -> str:
        """Content address: the same request anywhere is the same job."""
        body = json.dumps([self.kind, self.task, self.params_json, self.code_version], separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()[:32]


# A queued job is wanted while someone reads it (a page waiting, a poll) at least this often.
WANT_S = 60.0


@dataclass(frozen=True)
class Ask:
    """Who asks for a job and on what terms."""
    client: str = ""  # the runners serve clients in turn: an opaque key (an address), never shown
    keep: bool = False  # stays queued though nobody reads it (the server's own default runs)
    want_s: float = WANT_S  # queued and unread this long: expired
    max_queued: int | None = None  # a new row past this many queued jobs is refused (QueueFull)


ANYONE = Ask()  # the terms when nobody says who asks (operators, tests)

# The client of the server's own runs (its kinds' defaults, queued at start-up): runners take them
# only when no visitor's run waits (`claim(whose="server")`, one runner per process, in the order they
# were queued), and a visitor asking for one of them (`ensure`) makes it theirs, so it goes ahead.
SERVER = "server"
Whose = Literal["any", "visitors", "server"]


class QueueFull(Exception):
    """The queue holds `queued` jobs, its bound: nothing was stored."""

    def __init__(self, queued: int, bound: int) -> None:
        super().__init__(f"the job queue is full ({queued} queued, bound {bound})")
        self.queued, self.bound = queued, bound


@dataclass(frozen=True)
class JobRecord:
    id: str
    kind: str
    task: str
    params: dict[str, Any]
    code_version: str
    device: str
    title: str
    state: str
    stage: str
    step: int
    done: int
    total: int
    fraction: float  # never decreases within a run: a takeover catches up before it moves on
    runner: str | None  # host:pid that holds the job, or finished it
    attempts: int  # claims: 1 for a job computed once, more after a runner was lost
    created_at: float
    started_at: float | None
    finished_at: float | None
    seconds: float | None  # the finishing attempt's own time
    error: str | None
    history: str = ""  # one line per takeover, for operators
    result_size: int | None = None
    client: str = ""  # who first asked (Ask.client)
    keep: bool = False
    wanted_until: float | None = None  # a queued job unread past this expires, unless kept

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")


class JobBackend(Protocol):
    def ensure(self, spec: JobSpec, ask: Ask = ANYONE) -> JobRecord:
        """The row of `spec`, inserted as queued if absent (atomic: every caller gets the one row).
        A queued row is wanted again for `ask.want_s` (and kept, if `ask.keep`); a queued row of the
        server's own (client SERVER) asked for by a visitor becomes that visitor's. QueueFull, storing
        nothing, when the row is new and `ask.max_queued` jobs are queued already."""
        ...

    def get(self, ident: str) -> JobRecord | None: ...

    def touch(self, ident: str, want_s: float = WANT_S) -> None:
        """Someone is reading this job: if queued, it stays wanted for `want_s` more."""
        ...

    def queued(self) -> int:
        """How many jobs are queued now."""
        ...

    def result(self, ident: str) -> bytes | None: ...

    def claim(self, runner: str, lease_s: float, tasks: Sequence[str], devices: Sequence[str],
              code_version: str, whose: Whose = "any") -> JobRecord | None:
        """The next claimable job of these tasks, devices and code version, now held by `runner`: a
        running one whose lease ran out (its runner is gone) first, then the queued ones, clients in
        turn (each client's oldest first). `whose`: "visitors" leaves the server's own runs (client
        SERVER) alone, "server" takes only those (oldest first). Queued jobs past their `wanted_until`
        and not kept are deleted first. None if there is none."""
        ...

    def heartbeat(self, ident: str, runner: str, lease_s: float, stage: str, step: int, done: int,
                  total: int) -> bool:
        """Renew the lease and write progress (progress only if it does not go backwards).
        False if `runner` no longer holds the job: it must stop and write nothing."""
        ...

    def finish(self, ident: str, runner: str, result: bytes, seconds: float) -> bool: ...

    def fail(self, ident: str, runner: str, error: str) -> bool: ...

    def release(self, ident: str, runner: str) -> bool:
        """A running job handed back to the queue by a runner that is stopping (SIGTERM), so another
        takes it at once instead of after the lease. Its progress stays (it never goes backwards)."""
        ...

    def retry(self, ident: str) -> bool:
        """A failed job queued again (on request only: the app never retries by itself)."""
        ...

    def delete(self, ident: str) -> bool: ...

    def listing(self) -> list[JobRecord]: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


# The columns read into a JobRecord, in its field order (the result bytes never: they are read alone).
COLUMNS = ("id", "kind", "task", "params", "code_version", "device", "title", "state", "stage", "step", "done",
           "total", "fraction", "runner", "attempts", "created_at", "started_at", "finished_at", "seconds", "error",
           "history", "result_size", "client", "keep", "wanted_until")


def record(row: Sequence[Any]) -> JobRecord:
    values = dict(zip(COLUMNS, row, strict=True))
    values["params"] = json.loads(values["params"])
    for key in ("step", "done", "total", "attempts"):
        values[key] = int(values[key])
    for key in ("fraction", "created_at"):
        values[key] = float(values[key])
    values["keep"] = bool(values["keep"])
    values["client"] = values["client"] or ""
    for key in ("started_at", "finished_at", "seconds", "wanted_until"):
        values[key] = None if values[key] is None else float(values[key])
    values["history"] = values["history"] or ""
    return JobRecord(**values)


# The columns this version added to a table an older version made (ALTER TABLE … ADD COLUMN).
ADDED_COLUMNS = (("client", "TEXT NOT NULL DEFAULT ''"), ("keep", "INTEGER NOT NULL DEFAULT 0"),
                 ("wanted_until", "REAL"))


def whose_clause(whose: Whose, column: str, mark: str) -> str:
    """The claim's condition on the row's client: `mark` is the driver's placeholder for SERVER."""
    return {"any": "", "visitors": f" AND {column} <> {mark}", "server": f" AND {column} = {mark}"}[whose]


def promotes(ask: Ask) -> bool:
    """A visitor's ask (a client that is neither the server nor anonymous) takes over a server's queued run."""
    return ask.client not in ("", SERVER)


def lost_note(runner: str | None, when: float) -> str:
    return f"runner {runner} lost its lease at {when:.0f}; taken over\n"


def open_job_backend(data_dir: Path, database_url: str | None = None) -> JobBackend:
    """PostgreSQL when `database_url` is set, else SQLite in `data_dir` (the uploads' file)."""
    if database_url:
        from app.stores.jobs.postgres import PostgresJobBackend  # psycopg only when asked for

        return PostgresJobBackend(database_url)
    from app.stores.jobs.sqlite import SqliteJobBackend
    from app.stores.uploads import SQLITE_FILE

    return SqliteJobBackend(Path(data_dir) / SQLITE_FILE)
