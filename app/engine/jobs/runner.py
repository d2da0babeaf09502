"""A job runner: claim one job, run it, store its result; renew the lease while it runs.

Exactly one runner computes a job: the store's claim is atomic (app/stores/jobs). While it
runs, the lease is renewed every `lease_s / 4` by a heartbeat thread (so a long step between
progress calls cannot lose it), and each progress call writes stage and step. A runner killed
mid-job (`kill -9`, a crash, a machine gone) stops renewing: after `lease_s` another runner
claims the job and runs it again from the start. Runs are seeded, so the rerun is the same run,
to the last digit on CPU; restarting is chosen over resuming from a stage because it needs no
checkpoint format per kind and cannot mix two runs' state. A runner that finds its lease gone
(it was stalled past it and the job was taken over) stops at its next progress call and writes nothing.

A runner process has one runner per lane for the visitors' runs and one more, the start-up runner, for
the server's own (its default runs, client SERVER): it takes them one at a time in the order they were
queued, only while no lane runs a visitor's job, and a run of its own pauses at its next progress call
as soon as one does, until every lane is idle again (`Lanes`). So a visitor's run never shares the
runners' CPU with the server's, and the start-up runs never run two at once.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

from app.engine.jobs import codec
from app.engine.jobs.tasks import JobTask, code_version, lanes
from app.stores.jobs import JobBackend, JobRecord, Whose
from app.stores.uploads import StoreUnavailable

log = logging.getLogger("app.jobs")
PROGRESS_EVERY_S = 0.2  # progress writes at most this often (a run makes thousands of calls)


class LeaseLost(Exception):
    """Another runner holds this job now: stop, write nothing."""


class Stopping(Exception):
    """This runner is stopping (its process exits): the job goes back to the queue."""


PAUSE_POLL_S = 0.05  # a paused start-up run looks this often whether the lanes are idle again
PAUSED = "paused: a visitor's run goes first"  # a paused start-up run's stage, as its page shows it


def runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Lanes:
    """How many of this process's lane runners are running a visitor's job now: the start-up runner
    claims nothing and pauses its run while any is."""

    def __init__(self) -> None:
        self._busy = 0
        self._idle = threading.Condition()

    def enter(self) -> None:
        with self._idle:
            self._busy += 1

    def leave(self) -> None:
        with self._idle:
            self._busy -= 1
            if self._busy == 0:
                self._idle.notify_all()

    @property
    def busy(self) -> bool:
        return self._busy > 0

    def wait_idle(self, timeout: float) -> bool:
        """True once no lane runs a job (at once if none does), False after `timeout`."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)


class JobRunner:
    def __init__(self, store: JobBackend, tasks: Mapping[str, JobTask], devices: tuple[str, ...] = ("cpu",),
                 lease_s: float = 30.0, poll_s: float = 0.5, name: str | None = None,
                 threads: int | None = None, whose: Whose = "any", activity: Lanes | None = None,
                 yields: bool = False) -> None:
        self.store, self.tasks, self.devices = store, dict(tasks), devices
        # whose jobs it claims; the lanes' activity it reports (a lane runner) or yields to (yields: the
        # start-up runner)
        self.whose, self.activity, self.yields = whose, activity, yields
        self.threads = threads  # torch intra-op threads its thread pins at start (runtime/device.py's why)
        self.lease_s, self.poll_s = lease_s, poll_s
        self.name = name or runner_name()
        self.wake = threading.Event()  # set by a local submit, so a new job starts without a poll's wait
        self.current: str | None = None  # the job being run, for release() at a graceful stop
        self._stop = threading.Event()

    def run_forever(self, stop: threading.Event) -> None:
        """Until `stop` is set; a job running then stops at its next progress call and is handed back."""
        self._stop = stop
        if self.threads is not None:
            from app.engine.runtime.device import pin_threads
            pin_threads(self.threads)
        while not stop.is_set():
            try:
                ran = self.run_one()
            except StoreUnavailable as exc:  # the database is down: wait, try again
                log.warning("job store unavailable: %s", exc)
                ran = False
            if not ran:
                self.wake.wait(self.poll_s)
                self.wake.clear()

    def run_one(self) -> bool:
        """Claim and run one job; False if there was none to claim (or, yielding, a lane is busy)."""
        if self._yielding():
            return False
        job = self.store.claim(self.name, self.lease_s, tuple(self.tasks), self.devices, code_version(), self.whose)
        if job is None:
            return False
        self.current = job.id
        reports = None if self.yields else self.activity
        if reports is not None:
            reports.enter()
        try:
            self._run(job)
        finally:
            self.current = None
            if reports is not None:
                reports.leave()
        return True

    def _yielding(self) -> bool:
        return self.yields and self.activity is not None and self.activity.busy

    def release(self) -> None:
        """At a graceful stop: hand the job being run back to the queue (another runner takes it now)."""
        ident = self.current
        if ident is not None and self.store.release(ident, self.name):
            log.info("job %s handed back by %s (stopping)", ident, self.name)

    def _run(self, job: JobRecord) -> None:
        task = self.tasks[job.task]
        lost = threading.Event()
        done = threading.Event()
        state: dict[str, Any] = {"stage": "starting", "step": 0, "done": 0, "total": 0}
        last = [0.0]

        def beat() -> None:
            if not self.store.heartbeat(job.id, self.name, self.lease_s, str(state["stage"]), int(state["step"]),
                                        int(state["done"]), int(state["total"])):
                lost.set()

        def heartbeat_loop() -> None:
            while not done.wait(self.lease_s / 4):
                try:
                    beat()
                except StoreUnavailable:
                    pass  # the next beat tries again; the lease covers a few misses

        def progress(stage: str, step: int, steps_done: int, total: int) -> None:
            if lost.is_set():
                raise LeaseLost(job.id)
            if self._stop.is_set():
                raise Stopping(job.id)
            if self._yielding():  # a visitor's run started: this one waits (its lease still renewed)
                log.info("job %s paused: a visitor's run goes first", job.id)
                assert self.activity is not None
                state["stage"] = PAUSED  # what its page shows meanwhile
                beat()
                while not self.activity.wait_idle(PAUSE_POLL_S):
                    if lost.is_set():
                        raise LeaseLost(job.id)
                    if self._stop.is_set():
                        raise Stopping(job.id)
                log.info("job %s resumed", job.id)
            state.update(stage=stage, step=step, done=steps_done, total=total)
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                beat()

        beater = threading.Thread(target=heartbeat_loop, name=f"job-heartbeat-{job.id[:8]}", daemon=True)
        beater.start()
        began = time.perf_counter()
        log.info("job %s (%s) claimed by %s, attempt %d", job.id, job.title, self.name, job.attempts)
        try:
            result = task.execute(job.params, progress)
            raw = codec.dumps(result)
        except LeaseLost:
            log.warning("job %s: lease lost to another runner; stopped", job.id)
            return
        except Stopping:
            self.store.release(job.id, self.name)
            log.info("job %s handed back: runner %s stopping", job.id, self.name)
            return
        except Exception as exc:  # stored with the job, shown on its page, retried only on request
            log.error("job %s failed: %s", job.id, traceback.format_exc())
            self.store.fail(job.id, self.name, f"{type(exc).__name__}: {exc}")
            return
        finally:
            done.set()
            beater.join()
        seconds = time.perf_counter() - began
        if self.store.finish(job.id, self.name, raw, seconds):
            log.info("job %s done in %.1f s (%d bytes)", job.id, seconds, len(raw))
        else:
            log.warning("job %s finished here but was taken over meanwhile; result dropped", job.id)


def process_runners(store: JobBackend, tasks: Mapping[str, JobTask], devices: tuple[str, ...], lease_s: float,
                    name: str, threads: int | None, poll_s: float = 0.5) -> list[JobRunner]:
    """A runner process's runners: one per lane for the visitors' runs, then the start-up runner for the
    server's own (every task, one at a time, yielding to the lanes)."""
    busy = Lanes()
    runners = [JobRunner(store, lane_tasks, devices, lease_s, poll_s, f"{name}/{lane}", threads, "visitors", busy)
               for lane, lane_tasks in sorted(lanes(tasks).items())]
    if tasks:
        runners.append(JobRunner(store, tasks, devices, lease_s, poll_s, f"{name}/start-up", threads, "server",
                                 busy, yields=True))
    return runners
