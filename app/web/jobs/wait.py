"""Waiting for jobs on the event loop, before a computation takes a compute slot.

A step page with a training path needs the path's runs (jobs, some under a second each, computed by a
runner). Waited for inside the compute worker, they would hold one of its COMPUTE_SLOTS the
whole time, doing nothing; waited for here, between cheap reads of the job rows (in the request
thread pool), they hold nothing, and the computation that follows finds them done.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable

from starlette.concurrency import run_in_threadpool

from app.engine.jobs.client import JobClient, JobFailed, NotStarted
from app.engine.jobs.tasks import Job
from app.engine.runtime.compute import ComputeBusy
from app.stores.jobs import JobRecord

WAIT_S = 60.0  # as long as a kind's own short runs wait (JobClient.wait_result); past it, a 503 + Retry-After
POLL_S = 0.05


async def await_jobs(jobs_of_app: JobClient, needed: Iterable[Job], timeout_s: float = WAIT_S,
                     start: str | None = None) -> None:
    """Return once every job somebody asked for is done; NotStarted (with `start`, the
    request that would start them) when some were never asked for, JobFailed for one that failed,
    ComputeBusy when they are not done within `timeout_s` (the runners are behind)."""
    needed = list(needed)
    found = [await run_in_threadpool(jobs_of_app.find, job) for job in needed]
    missing = [jobs_of_app.spec(need).title for need, job in zip(needed, found, strict=True) if job is None]
    if missing:
        raise NotStarted(missing, start)
    jobs = [job for job in found if job is not None]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        for job in jobs:
            if job.state == "failed":
                raise JobFailed(f"{job.title}: {job.error}")
        jobs = [job for job in jobs if job.state != "done"]
        if not jobs:
            return
        if loop.time() > deadline:
            raise ComputeBusy(f"{len(jobs)} training run(s) still queued or running after {timeout_s:.0f} s")
        await asyncio.sleep(POLL_S)
        jobs = [await run_in_threadpool(_reread, jobs_of_app, job) for job in jobs]


def _reread(jobs: JobClient, seen: JobRecord) -> JobRecord:
    job = jobs.status(seen.id)
    if job is None:  # expired or deleted meanwhile: never queued again by a read
        raise NotStarted([seen.title])
    return job
