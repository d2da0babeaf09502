"""The queue's fairness and expiry against a real server with one runner (`python -m app`, its runner
child): client A posts 100 distinct toy runs, then client B posts one; B's is done before A's fifth.
After a restart, the runs A left queued (nobody reading them) expire instead of running ahead of a new
request. Clients are told apart by X-Forwarded-For, which uvicorn trusts from loopback (its default
--forwarded-allow-ips), as it would from a reverse proxy."""
from __future__ import annotations

import time

import httpx
import pytest
from live_server import running_server

from app.stores.jobs import open_job_backend

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]

PATH = "/api/walkthroughs/toy_grpo/paths/r1?seed={seed}"
A, B, C = ({"X-Forwarded-For": f"10.0.0.{n}"} for n in (1, 2, 3))


def env(tmp_path, want_s: float) -> dict:
    return {"DATA_DIR": str(tmp_path / "data"), "DEFAULT_RUNS": "0", "JOB_STARTS_BURST": "1000",
            "JOB_QUEUE_MAX": "1000", "JOB_WANT_S": str(want_s), "DEVICE": "cpu"}


def done(http: httpx.Client, seed: int) -> bool:
    r = http.get(PATH.format(seed=seed))
    assert r.status_code in (200, 202), r.text
    assert r.json()["state"] != "failed", r.json()["error"]
    return r.json()["state"] == "done"


def test_one_clients_hundred_runs_do_not_stand_in_front_of_anothers_one(tmp_path):
    with running_server(tmp_path, env=env(tmp_path, want_s=600)) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        for seed in range(100):
            assert http.post(PATH.format(seed=seed), headers=A).status_code in (200, 202)
        assert http.post(PATH.format(seed=1000), headers=B).status_code in (200, 202)
        deadline = time.monotonic() + 120
        while not done(http, 1000):
            assert time.monotonic() < deadline, "B's run not done after 120 s"
            time.sleep(0.1)
        a_done = sum(done(http, seed) for seed in range(100))
        assert a_done <= 5, f"{a_done} of A's runs finished before B's one"


def test_after_a_restart_abandoned_queued_runs_expire_instead_of_running_first(tmp_path):
    want_s = 3.0
    with running_server(tmp_path, env=env(tmp_path, want_s)) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        for seed in range(40):
            assert http.post(PATH.format(seed=seed), headers=A).status_code in (200, 202)
    # A left, and the server stopped. The store as it was left (read directly: a GET would keep them wanted):
    store = open_job_backend(tmp_path / "data")
    try:
        # a run its stopping runner handed back is wanted for a while again: someone may be waiting for it
        left = {j.id for j in store.listing() if j.state == "queued" and "handed back" not in j.history}
        assert left, "the first server finished all 40 runs before it stopped"
        time.sleep(want_s + 1)  # nobody reads them
        with running_server(tmp_path, env=env(tmp_path, want_s)) as server, \
                httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.post(PATH.format(seed=500), headers=C).status_code in (200, 202)
            deadline = time.monotonic() + 60
            while not done(http, 500):
                assert time.monotonic() < deadline, "the new request's run not done after 60 s"
                time.sleep(0.1)
            remaining = {j.id: j.state for j in store.listing()}
    finally:
        store.close()
    assert not left & set(remaining), {i: remaining[i] for i in left & set(remaining)}  # expired, none ran
