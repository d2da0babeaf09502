"""Starting runs: the one way a request creates work, for every kind's POSTs.

A GET reads jobs (web/jobs/wait.py); only these calls queue them, and each is bounded:
- per client, a token bucket (`StartLimiter`): JOB_STARTS_BURST runs at once, then
  JOB_STARTS_PER_MIN a minute; beyond it 429 + Retry-After, before anything is stored. A run that
  somebody already started costs nothing (it is read, not queued again).
- the whole queue: past JOB_QUEUE_MAX queued runs the store refuses the new row (QueueFull):
  503 + Retry-After, nothing stored.
- fairness and expiry are the store's: runners take clients in turn, and a queued run nobody
  reads for a minute expires (app/stores/jobs).
The client is the request's address (behind a proxy, uvicorn's --forwarded-allow-ips makes it the
forwarded one). The buckets live in each web process: with N workers a client may start N times as many.
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from app.engine.jobs.client import JobClient
from app.engine.jobs.tasks import Job
from app.stores.jobs import SERVER, Ask, JobRecord
from app.web.kind import DefaultRun

KEEP_CLIENTS = 10_000  # buckets remembered; the least recently seen is forgotten (it is full again by then)


class TooManyStarts(Exception):
    """This client started its share of runs: `retry_after_s` until the next one may start."""

    def __init__(self, needed: int, retry_after_s: int) -> None:
        super().__init__(f"this client has started its share of training runs; {needed} more may start "
                         f"in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class StartLimiter:
    def __init__(self, burst: int, per_min: float) -> None:
        self.burst, self.rate = float(burst), per_min / 60.0
        self._tokens: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, client: str, n: int) -> None:
        """Take `n` starts from the client's bucket, or TooManyStarts (taking none)."""
        if n <= 0:
            return
        now = time.monotonic()
        with self._lock:
            tokens, at = self._tokens.pop(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens < n:
                self._tokens[client] = (tokens, now)
                wait = (min(n, self.burst) - tokens) / self.rate
                raise TooManyStarts(n, max(1, math.ceil(wait)))
            self._tokens[client] = (tokens - n, now)
            while len(self._tokens) > KEEP_CLIENTS:
                self._tokens.popitem(last=False)


def client_key(request: Request) -> str:
    return request.client.host if request.client else "?"


def start_limiter(request: Request) -> StartLimiter:
    return request.app.state.context.starts


async def start_jobs(request: Request, needed: Iterable[Job]) -> list[JobRecord]:
    """Queue what is not yet asked for (a failed run is queued again): the client's bucket is charged
    for each new run first (TooManyStarts), and the store refuses rows past the bound (QueueFull)."""
    needed = list(needed)
    jobs = request.app.state.context.jobs
    found = [await run_in_threadpool(jobs.find, need) for need in needed]
    new = sum(1 for job in found if job is None or job.state == "failed")
    start_limiter(request).take(client_key(request), new)
    settings = request.app.state.settings
    ask = Ask(client=client_key(request), want_s=settings.job_want_s, max_queued=settings.job_queue_max)
    started = []
    for need, job in zip(needed, found, strict=True):
        if job is not None and job.state == "failed" and await run_in_threadpool(jobs.retry, job.id):
            job = await run_in_threadpool(jobs.status, job.id)
        if job is None or job.state != "done":
            job = await run_in_threadpool(jobs.submit, need, ask)
        started.append(job)
    return started


def queue_default_runs(jobs: JobClient, needed: Iterable[DefaultRun | Job]) -> None:
    """The server's own runs (its kinds' defaults), queued at start-up and kept until done: a first
    visitor finds them computed, and no GET had to start them. Queued in their order (FIRST_PAGE
    first, stable within one): the start-up runner takes the server's runs in the order they were queued."""
    runs = sorted((run if isinstance(run, DefaultRun) else DefaultRun(run) for run in needed),
                  key=lambda run: run.order)
    for run in runs:
        jobs.submit(run.job, Ask(client=SERVER, keep=True, want_s=jobs.want_s))
