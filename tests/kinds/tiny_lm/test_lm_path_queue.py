"""Where a queued path waits (issue 47): the paths box of a run that is still queued says how many runs go
before it, the server's start-up runs included (the toy's six paths come first), and counts down as they end."""
from __future__ import annotations

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from runs import jobs_of

from app.house import create_app
from app.web.jobs.start import queue_default_runs
from app.web.settings import Settings

BOX = "/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=3"


def box_text(client) -> str:
    r = client.get(BOX, headers={"HX-Request": "true"})
    assert r.status_code == 200 and "no-store" in r.headers["cache-control"]
    return " ".join(BeautifulSoup(r.text, "html.parser").get_text(" ").split())


def test_a_queued_default_path_says_how_many_runs_go_before_it(tmp_path):
    app = create_app(Settings(device="cpu", data_dir=tmp_path / "data", job_runner="off", default_runs=False))
    client = TestClient(app)
    runs = [run for kind in app.state.kinds.kinds if kind.default_runs is not None for run in kind.default_runs(app)]
    # as the server does at start-up; no runner here, so they stay queued
    queue_default_runs(app.state.context.jobs, runs)
    toy = [job for job in jobs_of(client).store.listing() if job.kind == "toy"]
    assert len(toy) == 6
    assert "Waiting for a runner: 6 runs ahead of it." in box_text(client)
    for job in toy[:5]:  # five of the toy's paths end
        jobs_of(client).store.delete(job.id)
    assert "Waiting for a runner: 1 run ahead of it." in box_text(client)
