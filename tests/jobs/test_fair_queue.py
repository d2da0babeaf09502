"""The queue is fair and bounded, on both backends (app/stores/jobs): runners take the clients'
queued jobs in turn, a queued job nobody reads (and nobody asked to keep) expires instead of running,
a new row past the bound is refused with nothing stored, and an older table gains the new columns."""
from __future__ import annotations

import sqlite3
import time

import pytest

from app.stores.jobs import Ask, JobSpec, QueueFull

CODE = "test-code"


def spec(seed: int) -> JobSpec:
    return JobSpec("k", "t", {"seed": seed, "device": "cpu"}, CODE, f"seed {seed}")


def claim(store, runner: str = "r1"):
    return store.claim(runner, 30.0, ("t",), ("cpu",), CODE)


def drain(store) -> list[int]:
    """Claim and finish every job, one at a time as one runner does: the seeds in the order run."""
    order = []
    while (job := claim(store)) is not None:
        order.append(job.params["seed"])
        assert store.finish(job.id, "r1", b"{}", 0.1)
    return order


def test_one_clients_hundred_jobs_do_not_stand_in_front_of_anothers_one(store):
    for seed in range(100):
        store.ensure(spec(seed), Ask(client="A"))
    store.ensure(spec(1000), Ask(client="B"))
    order = drain(store)
    assert order.index(1000) == 1  # after A's first (its oldest), before A's second
    assert sorted(order) == [*range(100), 1000]


def test_clients_are_served_in_turn_and_a_running_job_counts_as_its_clients_turn(store):
    for seed in (1, 2, 3):
        store.ensure(spec(seed), Ask(client="A"))
    first = claim(store)
    assert first.params["seed"] == 1  # A's, running now
    for seed in (11, 12):
        store.ensure(spec(seed), Ask(client="B"))
    store.ensure(spec(21), Ask(client="C"))
    assert store.finish(first.id, "r1", b"{}", 0.1)
    assert drain(store) == [11, 21, 2, 12, 3]  # B's and C's first turns, then A's second, B's second...


def test_a_queued_job_nobody_reads_expires_instead_of_running(store):
    store.ensure(spec(1), Ask(client="A", want_s=0.2))
    kept = store.ensure(spec(2), Ask(client="server", keep=True, want_s=0.2))
    read = store.ensure(spec(3), Ask(client="A", want_s=0.2))
    assert kept.keep and not read.keep and read.wanted_until is not None
    time.sleep(0.1)
    store.touch(read.id, 5.0)  # someone is waiting for this one (a page, a poll)
    time.sleep(0.3)
    assert drain(store) == [2, 3]  # the unread one is gone; the kept and the read ones ran
    assert store.get(spec(1).id) is None
    assert store.get(spec(2).id).state == "done"


def test_asking_again_for_a_queued_job_keeps_it_wanted(store):
    store.ensure(spec(1), Ask(client="A", want_s=0.2))
    time.sleep(0.1)
    store.ensure(spec(1), Ask(client="B", want_s=5.0))
    time.sleep(0.3)
    assert drain(store) == [1]
    assert store.get(spec(1).id).client == "A"  # the first asker's turn, kept


def test_past_the_bound_a_new_job_is_refused_and_nothing_is_stored(store):
    for seed in range(3):
        store.ensure(spec(seed), Ask(client="A", max_queued=3))
    with pytest.raises(QueueFull) as refused:
        store.ensure(spec(99), Ask(client="B", max_queued=3))
    assert (refused.value.queued, refused.value.bound) == (3, 3)
    assert store.get(spec(99).id) is None and store.queued() == 3
    assert store.ensure(spec(1), Ask(client="B", max_queued=3)).state == "queued"  # one already there: read
    job = claim(store)
    assert store.finish(job.id, "r1", b"{}", 0.1)
    assert store.ensure(spec(99), Ask(client="B", max_queued=3)).state == "queued"  # room again


def test_a_job_handed_back_or_retried_is_wanted_again(store):
    store.ensure(spec(1), Ask(client="A", want_s=0.2))
    job = claim(store)
    time.sleep(0.3)
    assert store.release(job.id, "r1")  # a stopping runner: someone was waiting; it is not expired at once
    assert claim(store).id == job.id
    assert store.fail(job.id, "r1", "boom") and store.retry(job.id)
    assert claim(store).id == job.id


def test_an_older_sqlite_file_gains_the_columns_and_its_queued_rows_expire(tmp_path):
    path = tmp_path / "data" / "old.sqlite3"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:  # the table as the previous version made it
        conn.execute("CREATE TABLE grpo_jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, task TEXT NOT NULL, "
                     "params TEXT NOT NULL, code_version TEXT NOT NULL, device TEXT NOT NULL, title TEXT NOT NULL, "
                     "state TEXT NOT NULL, stage TEXT NOT NULL DEFAULT 'queued', step INTEGER NOT NULL DEFAULT 0, "
                     "done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0, fraction REAL NOT NULL "
                     "DEFAULT 0, runner TEXT, attempts INTEGER NOT NULL DEFAULT 0, lease_until REAL, created_at REAL "
                     "NOT NULL, started_at REAL, finished_at REAL, seconds REAL, error TEXT, history TEXT NOT NULL "
                     "DEFAULT '', result_size INTEGER, result BLOB)")
        old = spec(7)
        conn.execute("INSERT INTO grpo_jobs (id, kind, task, params, code_version, device, title, state, created_at) "
                     "VALUES (?, 'k', 't', ?, ?, 'cpu', 'old', 'queued', 1)", (old.id, old.params_json, CODE))
    from app.stores.jobs.sqlite import SqliteJobBackend

    store = SqliteJobBackend(path)
    try:
        assert store.get(old.id).client == "" and store.get(old.id).wanted_until is None
        store.ensure(spec(8), Ask(client="new"))
        assert drain(store) == [8]  # the abandoned row of the last server expired; the new request ran
    finally:
        store.close()
