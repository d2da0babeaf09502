"""Where a queued job waits (JobClient.ahead): the jobs of its own lane running or queued before it; other
lanes' jobs do not count (each lane has its own runner); a job that is not queued has no place."""
from __future__ import annotations

import job_tasks

from app.engine.jobs.client import JobClient
from app.engine.jobs.tasks import JobTask
from app.stores.jobs import Ask, open_job_backend


def task(name: str, lane: str) -> JobTask:
    return job_tasks.task(name, lane=lane)


def test_a_queued_job_counts_its_lanes_jobs_ahead_of_it(tmp_path):
    client = JobClient()
    store = open_job_backend(tmp_path / "data")
    client.configure(store, {"slow": task("slow", "real"), "also": task("also", "real"),
                             "other": task("other", "long")}, "off")
    try:
        first = client.submit(job_tasks.job("slow", n=1, device="cpu"), Ask(client="A"))
        client.submit(job_tasks.job("other", n=2, device="cpu"), Ask(client="A"))  # another lane: never counted
        second = client.submit(job_tasks.job("also", n=3, device="cpu"), Ask(client="B"))
        third = client.submit(job_tasks.job("slow", n=4, device="cpu"), Ask(client="C"))
        assert [client.ahead(j) for j in (first, second, third)] == [0, 1, 2]
        claimed = store.claim("r1", 30.0, ("slow", "also"), ("cpu",), client.tasks["slow"].spec({}).code_version)
        assert claimed is not None and claimed.id == first.id
        running = client.status(first.id)
        assert running is not None and client.ahead(running) is None  # running: it waits for nothing
        assert client.ahead(client.status(third.id)) == 2  # the running one and the second still ahead
        store.finish(first.id, "r1", b"{}", 0.1)
        assert client.ahead(client.status(third.id)) == 1
    finally:
        client.shutdown()
        store.close()
