"""Roles (issue 21): a web process started with --no-runner only serves (its jobs stay queued);
`python -m app.worker` alone computes them for it; the operator's `python -m app.jobs` lists,
shows, deletes and retries; docker-compose.yml is two serving replicas, a worker and PostgreSQL."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
import yaml
from live_server import running_server
from paths import ROOT

from app import jobs as jobs_cli
from app.engine.jobs.tasks import lanes
from app.house import registry
from app.stores.jobs import JobSpec, open_job_backend

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase
PATH = "/api/walkthroughs/tiny_lm_grpo/paths/r1?seed=43&scale=0.03"


def test_a_no_runner_server_only_serves_and_a_worker_computes_for_it(tmp_path):
    env = {"DATA_DIR": str(tmp_path / "data"), "COMPUTE_PROCESSES": "0", "DEVICE": "cpu", "JOB_LEASE_S": "3"}
    (tmp_path / "web").mkdir()
    with running_server(tmp_path / "web", "--no-runner", env=env) as web:
        assert httpx.get(web.url + PATH, timeout=30).status_code == 404  # a GET starts nothing
        assert httpx.post(web.url + PATH, timeout=30).status_code == 202
        time.sleep(3)
        body = httpx.get(web.url + PATH, timeout=30).json()
        assert body["state"] == "queued" and body["run"]["computed_by"] is None  # nobody computes it here
        worker = subprocess.Popen([sys.executable, "-m", "app.worker"], cwd=ROOT, env={**os.environ, **env},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while (r := httpx.get(web.url + PATH, timeout=30)).status_code == 202:
                assert time.monotonic() < deadline and worker.poll() is None
                time.sleep(0.3)
            done = r.json()
            assert done["state"] == "done" and done["run"]["computed_by"].startswith(f"{os.uname().nodename}:{worker.pid}/")
        finally:
            worker.terminate()
            out = worker.communicate(timeout=30)[0].decode()
        assert worker.returncode == 0, out
        assert f"lanes {', '.join(sorted(lanes(registry().tasks)))}" in out  # one runner per lane: long, real, short


def test_the_operator_lists_shows_retries_and_deletes_jobs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    store = open_job_backend(tmp_path)
    done, failed = JobSpec("k", "t", {"seed": 1}, "v", "k done one"), JobSpec("k", "t", {"seed": 2}, "v", "k bad one")
    for spec in (done, failed):
        store.ensure(spec)
    store.claim("h:1", 30, ("t",), ("cpu",), "v")
    store.finish(done.id, "h:1", b"12345", 1.5)
    store.claim("h:1", 30, ("t",), ("cpu",), "v")
    store.fail(failed.id, "h:1", "ValueError: nan loss")
    assert jobs_cli.main(["list"]) == 0
    listing = capsys.readouterr().out
    assert f"{done.id}  done" in listing and "runs 1" in listing and "k done one" in listing
    assert f"{failed.id}  failed" in listing
    assert jobs_cli.main(["show", failed.id]) == 0 and "error: ValueError: nan loss" in capsys.readouterr().out
    assert jobs_cli.main(["retry", failed.id]) == 0 and store.get(failed.id).state == "queued"
    assert jobs_cli.main(["retry", done.id]) == 1  # only a failed job is queued again
    assert jobs_cli.main(["delete", done.id, "nope"]) == 1
    out = capsys.readouterr()
    assert f"deleted {done.id}" in out.out and "no job 'nope'" in out.err and store.get(done.id) is None
    store.close()


def test_compose_is_two_serving_replicas_a_worker_and_postgres():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"db", "web-a", "web-b", "worker"}
    urls = {services[s]["environment"]["DATABASE_URL"] for s in ("web-a", "web-b", "worker")}
    assert len(urls) == 1 and urls.pop().startswith("postgresql://")
    assert all(services[s]["environment"]["JOB_RUNNER"] == "off" for s in ("web-a", "web-b"))
    assert services["worker"]["command"] == ["python", "-m", "app.worker"]
    assert "JOB_RUNNER" not in services["worker"]["environment"]
