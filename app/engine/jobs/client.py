"""What a process asks of the jobs: submit a run, read its state, read its result.

One client per app (its AppContext's `jobs`, app/web/context.py), configured when the app is made
(app/web/jobs/setup.py job_client) with the store, the app's kinds' tasks and where runs are computed;
code that reads jobs is handed the client by whoever holds it:
- "process": by runner processes (`python -m app.worker`, one started beside each web process
  by `python -m app`, or on other machines); this process only writes and reads rows.
- "thread": by this client's runner threads in this process, started on the first submit (the test suite's
  TestClient apps: no process to start or stop per test).
- "off": by someone else's runners (a web replica with --no-runner); rows wait for them.
Reads go to the store every time (any worker or replica may have moved the job on); only a
finished result's decoding is kept, by job id, since a job id's result never changes.

Only `submit` creates work, and only a request that asks for work (a POST) or the server itself (its
default runs, at start-up) calls it; a page or API read (a GET) `find`s: it reads a job somebody
asked for, and marks a queued one as still wanted, but never queues one (docs/explanation/jobs.md).
"""
from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

from app.engine.jobs import codec
from app.engine.jobs.runner import JobRunner, process_runners, runner_name
from app.engine.jobs.tasks import Job, JobTask
from app.stores.jobs import ANYONE, SERVER, WANT_S, Ask, JobBackend, JobRecord, JobSpec

Mode = Literal["process", "thread", "off"]
KEEP_DECODED = 16


class JobsNotConfigured(RuntimeError):
    pass


class JobClient:
    def __init__(self) -> None:
        self._store: JobBackend | None = None
        self.tasks: dict[str, JobTask] = {}
        self.mode: Mode = "off"
        self._decoded: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._runners: list[JobRunner] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._lease_s = 30.0
        self._devices: tuple[str, ...] = ("cpu",)
        self.want_s = WANT_S  # a queued job nobody reads this long expires (app/stores/jobs)

    def configure(self, store: JobBackend, tasks: Mapping[str, JobTask], mode: Mode, lease_s: float = 30.0,
                  devices: tuple[str, ...] = ("cpu",), want_s: float = WANT_S) -> None:
        self.shutdown()
        with self._lock:
            self._store, self.tasks, self.mode = store, dict(tasks), mode
            self._lease_s, self._devices, self.want_s = lease_s, devices, want_s
            self._decoded.clear()
            self._stop = threading.Event()

    @property
    def store(self) -> JobBackend:
        if self._store is None:
            raise JobsNotConfigured("the job store is not configured in this process")
        return self._store

    def task(self, name: str) -> JobTask:
        return self.tasks[name]

    def spec(self, job: Job) -> JobSpec:
        """The stored row's identity of `job`, its params validated by its task's model."""
        return self.task(job.task).spec(job.params)

    def submit(self, job: Job, ask: Ask = ANYONE) -> JobRecord:
        """`job`'s row: found, or queued now (QueueFull past `ask.max_queued`). Never starts a second
        run of one job."""
        record = self.store.ensure(self.spec(job), ask)
        if record.state == "queued":
            self._nudge()
        return record

    def find(self, job: Job) -> JobRecord | None:
        """`job`'s row if somebody asked for it, else None: never queues one. A queued job read here is
        still wanted (it does not expire while someone reads it)."""
        return self.status(self.spec(job).id)

    def status(self, ident: str) -> JobRecord | None:
        job = self.store.get(ident)
        if job is not None and job.state == "queued":
            self.store.touch(ident, self.want_s)
            self._nudge()  # with runner threads (JOB_RUNNER=thread), someone waits: make sure they run
        return job

    def ahead(self, job: JobRecord) -> int | None:
        """For a queued job: how many jobs go before it, so a page can say where it waits; None for a job
        that is not queued. A visitor's job waits for the visitors' jobs of its lane (one runner each)
        running or queued before it; the server's own (a default run) for every visitor's job running or
        queued and the server's running or queued before it (one start-up runner, yielding to the lanes).
        An estimate: runners take clients in turn, so another client's later first job may still go first."""
        if job.state != "queued" or job.task not in self.tasks:
            return None
        others = [o for o in self.store.listing() if o.id != job.id and o.state in ("running", "queued")]
        if job.client == SERVER:
            return sum(1 for o in others if o.client != SERVER or o.state == "running" or o.created_at < job.created_at)
        lane = {name for name, task in self.tasks.items() if task.lane == self.task(job.task).lane}
        return sum(1 for o in others if o.task in lane and o.client != SERVER and (
            o.state == "running" or o.created_at < job.created_at))

    def result(self, job: JobRecord) -> Any | None:
        """A done job's result, decoded (once per process and id); None if it is not done (or was deleted)."""
        if job.state != "done":
            return None
        with self._lock:
            if job.id in self._decoded:
                self._decoded.move_to_end(job.id)
                return self._decoded[job.id]
        raw = self.store.result(job.id)
        if raw is None:
            return None
        value = codec.loads(raw, self.task(job.task).types)
        with self._lock:
            self._decoded[job.id] = value
            while len(self._decoded) > KEEP_DECODED:
                self._decoded.popitem(last=False)
        return value

    def wait(self, needed: Job, timeout_s: float, poll_s: float = 0.05) -> JobRecord | None:
        """Wait (on this thread, never the event loop) until the job somebody asked for is finished or
        `timeout_s` passed; None if nobody asked for it (or it expired, or was deleted)."""
        job = self.find(needed)
        deadline = time.monotonic() + timeout_s
        while job is not None and not job.finished and time.monotonic() < deadline:
            time.sleep(poll_s)
            job = self.status(job.id)
        return job

    def retry(self, ident: str) -> bool:
        again = self.store.retry(ident)
        if again:
            self._nudge()
        return again

    def _nudge(self) -> None:
        if self.mode != "thread":
            return
        with self._lock:
            if not self._runners:
                if self._stop.is_set():  # shut down before (a test's end): this use starts them afresh
                    self._stop = threading.Event()
                from app.engine.runtime.device import current_threads
                threads = current_threads()  # the web process's TORCH_THREADS: each runner thread pins it
                for runner in process_runners(self.store, self.tasks, self._devices, self._lease_s,
                                              runner_name(), threads):
                    thread = threading.Thread(target=runner.run_forever, args=(self._stop,),
                                              name=f"job-runner-{runner.name.rsplit('/', 1)[1]}", daemon=True)
                    thread.start()
                    self._runners.append(runner)
                    self._threads.append(thread)
                _RUNNING.add(self)
            for runner in self._runners:
                runner.wake.set()

    def shutdown(self, wait_s: float = 10.0) -> None:
        """Stop this process's runner threads: a job running stops at its next step and goes back to
        the queue. Waited for, so no thread is inside torch when the interpreter exits (that aborts it)."""
        self._stop.set()
        with self._lock:
            for runner in self._runners:
                runner.wake.set()
            threads, self._runners, self._threads = self._threads, [], []
        _RUNNING.discard(self)
        deadline = time.monotonic() + wait_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


# The clients whose runner threads run in this process: threads are the process's, whichever app
# started them, so they are stopped before the interpreter exits (a thread inside torch then aborts
# it), and the test suite stops the ones a test's apps started (tests/isolation.py). Bookkeeping of
# threads only: no app reads another's client through it.
_RUNNING: set[JobClient] = set()


def running_clients() -> list[JobClient]:
    """The clients whose runner threads are running in this process."""
    return list(_RUNNING)


@atexit.register
def _stop_runners() -> None:
    for client in running_clients():
        client.shutdown()


class JobFailed(RuntimeError):
    """A job the caller waited on failed; its stored error is the message."""


class NotStarted(LookupError):
    """A read needs runs that nobody has asked for: a page offers to start them (a POST), an API
    answers 404 saying which request starts them. Nothing was queued."""

    def __init__(self, titles: list[str], start: str | None = None) -> None:
        super().__init__(f"not computed yet: {', '.join(titles)}")
        self.titles, self.start = titles, start  # start: the request that starts them, "POST /api/…"


def wait_result(jobs: JobClient, needed: Job, timeout_s: float) -> Any:
    """For a caller that needs the result now (a kind's short runs): the result, or NotStarted (nobody
    asked for the run), JobFailed or TimeoutError. The run itself happens once, in a runner, and is kept."""
    job = jobs.wait(needed, timeout_s)
    if job is None:
        raise NotStarted([jobs.spec(needed).title])
    if job.state == "failed":
        raise JobFailed(job.error or "failed")
    value = jobs.result(job)
    if value is None:
        raise TimeoutError(f"job {job.id} ({job.title}) not done after {timeout_s:.0f} s: {job.state}, "
                           f"{100 * job.fraction:.0f} %")
    return value
