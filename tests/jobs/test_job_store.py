"""The job store on both backends (SQLite in DATA_DIR; PostgreSQL by DATABASE_URL), as rows only:
a spec is one row wherever it is asked; a claim is taken by exactly one runner even when many ask
at once; progress never goes backwards; a lapsed lease is taken over, and a job that loses its
runner MAX_ATTEMPTS times is failed instead; only the holder finishes or fails; retry and delete."""
from __future__ import annotations

import threading
import time

from app.stores.jobs import MAX_ATTEMPTS, JobSpec

CODE = "test-code"


def spec(seed: int = 0, task: str = "t", device: str = "cpu") -> JobSpec:
    return JobSpec("k", task, {"seed": seed, "device": device}, CODE, f"seed {seed}")


def claim(store, runner: str = "r1", lease: float = 30.0, tasks=("t",), devices=("cpu",), code=CODE):
    return store.claim(runner, lease, tasks, devices, code)


def test_the_same_spec_is_one_row_and_its_id_is_its_content(store):
    a, b = store.ensure(spec(1)), store.ensure(spec(1))
    assert a.id == b.id == spec(1).id and a.state == "queued" and len(store.listing()) == 1
    assert spec(2).id != spec(1).id
    assert JobSpec("k", "t", {"seed": 1, "device": "cpu"}, "other-code").id != spec(1).id


def test_many_runners_claiming_at_once_take_each_job_exactly_once(store):
    for seed in range(6):
        store.ensure(spec(seed))
    won: list[tuple[str, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def runner(name: str) -> None:
        start.wait()
        while (job := claim(store, name)) is not None:
            with lock:
                won.append((job.id, name))

    threads = [threading.Thread(target=runner, args=(f"r{i}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(j for j, _ in won) == sorted(spec(s).id for s in range(6))  # each once, none twice
    assert all(store.get(j).attempts == 1 and store.get(j).runner == name for j, name in won)


def test_claims_only_its_tasks_devices_and_code_version(store):
    store.ensure(spec(1, device="cuda"))
    store.ensure(spec(2, task="other"))
    store.ensure(JobSpec("k", "t", {"seed": 3, "device": "cpu"}, "newer-code"))
    assert claim(store) is None
    assert claim(store, devices=("cpu", "cuda")).params["seed"] == 1


def test_progress_never_goes_backwards_and_only_the_holder_writes(store):
    job = store.ensure(spec())
    claim(store, "a")
    assert store.heartbeat(job.id, "a", 30, "rl", 5, 5, 10)
    assert store.heartbeat(job.id, "a", 30, "rl", 3, 3, 10)  # lease renewed, progress kept
    got = store.get(job.id)
    assert (got.stage, got.step, got.done, got.fraction) == ("rl", 5, 5, 0.5)
    assert not store.heartbeat(job.id, "b", 30, "rl", 9, 9, 10)
    assert not store.finish(job.id, "b", b"x", 1.0) and not store.fail(job.id, "b", "no")
    assert store.heartbeat(job.id, "a", 30, "sft", 2, 7, 10) and store.get(job.id).stage == "sft"
    assert store.finish(job.id, "a", b"result", 2.5)
    done = store.get(job.id)
    assert (done.state, done.fraction, done.runner, done.seconds, done.result_size) == ("done", 1.0, "a", 2.5, 6)
    assert store.result(job.id) == b"result"
    assert claim(store, "c") is None  # done is done


def test_a_lapsed_lease_is_taken_over_and_progress_stays(store):
    job = store.ensure(spec())
    claim(store, "lost", lease=0.3)
    store.heartbeat(job.id, "lost", 0.3, "rl", 4, 4, 10)
    assert claim(store, "other") is None  # the lease still holds
    time.sleep(0.5)
    taken = claim(store, "other")
    assert taken is not None and taken.id == job.id and taken.runner == "other" and taken.attempts == 2
    assert taken.fraction == 0.4 and "runner lost lost its lease" in taken.history
    assert not store.heartbeat(job.id, "lost", 30, "rl", 5, 5, 10)  # the old runner is told to stop
    assert store.heartbeat(job.id, "other", 30, "rl", 1, 1, 10) and store.get(job.id).fraction == 0.4


def test_a_job_that_keeps_losing_its_runner_is_failed_not_handed_on(store):
    job = store.ensure(spec())
    for attempt in range(MAX_ATTEMPTS):
        assert claim(store, f"r{attempt}", lease=0.1).attempts == attempt + 1
        time.sleep(0.2)
    assert claim(store, "next") is None
    failed = store.get(job.id)
    assert failed.state == "failed" and f"lost {MAX_ATTEMPTS} times" in failed.error


def test_failure_is_kept_and_retried_only_on_request(store):
    job = store.ensure(spec())
    claim(store, "a")
    assert store.fail(job.id, "a", "ValueError: boom")
    assert claim(store, "b") is None  # never retried by itself
    failed = store.get(job.id)
    assert failed.state == "failed" and failed.error == "ValueError: boom" and store.result(job.id) is None
    assert store.retry(job.id) and not store.retry(job.id)  # a queued job is not "retried" again
    again = store.get(job.id)
    assert (again.state, again.error, again.attempts, again.fraction) == ("queued", None, 0, 0.0)
    assert claim(store, "b").id == job.id


def test_release_hands_a_job_back_at_once(store):
    job = store.ensure(spec())
    claim(store, "stopping")
    store.heartbeat(job.id, "stopping", 30, "rl", 2, 2, 10)
    assert store.release(job.id, "stopping") and not store.release(job.id, "stopping")
    back = store.get(job.id)
    assert back.state == "queued" and back.runner is None and back.fraction == 0.2
    assert claim(store, "next").id == job.id


def test_delete_removes_the_row_and_its_result(store):
    job = store.ensure(spec())
    claim(store, "a")
    store.finish(job.id, "a", b"r", 1.0)
    assert store.delete(job.id) and store.get(job.id) is None and store.result(job.id) is None
    assert not store.delete(job.id)
    assert store.ensure(spec()).state == "queued"  # asked again: a new run
