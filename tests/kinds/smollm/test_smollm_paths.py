"""The real model's training paths through TestClient, on the suite's tiny GGUF (conftest): the paths API runs
R1-Zero (a POST starts it, a GET reads it and never starts one; R1 and distillation are 404s naming why; bad
`scale` is a 422), and the page's panel: Run is a POST, the tabs say which path runs here, a queued run says
how many are ahead of it. The whole page flow of the default 20-step run is in test_smollm_paths_flow.py
(slower tier)."""
from __future__ import annotations

import dataclasses
import time

import pytest
from bs4 import BeautifulSoup
from runs import jobs_of

from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.web.paths import r1_zero_job
from app.stores.jobs import JobRecord

BASE = "/walkthroughs/smollm_grpo"
API = f"/api{BASE}/paths"


def soup(response):
    return BeautifulSoup(response.text, "html.parser")


def test_the_api_runs_r1_zero_and_a_get_never_starts_it(client):
    url = f"{API}/r1-zero?scale=0.1&seed=4"
    assert client.get(url).status_code == 404  # nobody started it: the 404 names the POST
    started = client.post(url)
    assert started.status_code in (200, 202), started.text
    deadline = time.monotonic() + 120
    while (answer := client.get(url)).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    steps = result["steps"]
    assert [s["step"] for s in steps] == [0, 1]
    assert [s["prompt"] for s in steps] == result["prompts"][:2]
    for s in steps:
        rewards = [a["reward"] for a in s["answers"]]
        assert len(rewards) == 8 and s["reward_mean"] == pytest.approx(sum(rewards) / 8)
        assert s["clip_share"] == 0.0
    assert steps[0]["kl_mean"] == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize(("path", "query", "status"), [("r1", "", 404), ("distillation", "", 404),
                                                       ("r1-zero", "scale=9", 422), ("r1-zero", "scale=0.01", 422),
                                                       ("r1-zero", "iterations_scale=2", 422),
                                                       ("r1-zero", "preset=nope", 422)])
def test_what_the_api_refuses_costs_nothing(client, path, query, status):
    before = len(jobs_of(client).store.listing())
    assert client.post(f"{API}/{path}?{query}").status_code == status
    assert len(jobs_of(client).store.listing()) == before


def test_the_panel_offers_r1_zero_and_says_why_not_the_others(client):
    page = client.get(f"{BASE}/steps/sample")
    assert page.status_code == 200
    panel = soup(page).select_one("#smol-paths")
    tabs = [a.get_text(" ", strip=True) for a in panel.select(".path-choice a")]
    assert tabs == ["R1-Zero", "R1 (not here)", "Distillation (not here)"]
    run = panel.select_one("form:has(#smol-path-run)")
    assert run["method"] == "post" and run["action"].startswith(f"{BASE}/paths/r1-zero")
    assert jobs_of(client).find(r1_zero_job("cpu")) is None, "a GET never starts the run"
    why = soup(client.get(f"{BASE}/steps/sample?process=r1")).select_one("#smol-paths")
    assert "cold start" in why.get_text(" ") and why.select_one("form") is None
    assert why.select_one("a[href*='tiny_lm_grpo'][href*='process=r1']") is not None
    assert client.get(f"{BASE}/steps/sample?process=nope").status_code == 404
    assert client.get(f"{BASE}/paths/r1?step=sample").status_code == 404


def test_a_queued_run_says_how_many_are_ahead(client, monkeypatch):
    """The store's answer for the panel's run, as it is while it waits (a record, not a run: a runner of the
    module's app would claim a real queued row at any moment)."""
    task, params = r1_zero_job("cpu")
    waiting = JobRecord(id="f" * 64, kind="smollm", task=task, params=params, code_version="v", device="cpu",
                        title="R1-Zero", state="queued", stage="", step=0, done=0, total=0, fraction=0.0, runner=None,
                        attempts=0, created_at=time.time(), started_at=None, finished_at=None, seconds=None,
                        error=None)
    monkeypatch.setattr(jobs_of(client), "find", lambda job: waiting if job == (task, params) else None)
    monkeypatch.setattr(jobs_of(client), "ahead", lambda job: 2 if job is waiting else None)
    box = client.get(f"{BASE}/paths/r1-zero?step=sample")
    assert box.status_code == 200 and box.headers["cache-control"] == "no-store"
    panel = soup(box).select_one("#smol-paths")
    assert panel["hx-get"].startswith(f"{BASE}/paths/r1-zero")
    assert "Waiting for the real model’s runner: 2 runs of this model ahead of it" in panel.get_text(" ")
    running = dataclasses.replace(waiting, state="running", stage="sampling", step=4, done=10, total=60)
    monkeypatch.setattr(jobs_of(client), "find", lambda job: running)
    text = soup(client.get(f"{BASE}/paths/r1-zero?step=sample")).select_one("#smol-paths").get_text(" ")
    assert "Step 4 of 20: sampling (16%)" in " ".join(text.split())


def test_a_queued_step_says_how_many_runs_are_ahead(client, monkeypatch):
    _, params = step_task.step_job(SmolParams(group_size=3, max_new_tokens=5), "cpu")
    waiting = JobRecord(id="e" * 64, kind="smollm", task=step_task.TASK, params=params, code_version="v",
                        device="cpu", title="step", state="queued", stage="", step=0, done=0, total=0, fraction=0.0,
                        runner=None, attempts=0, created_at=time.time(), started_at=None, finished_at=None,
                        seconds=None, error=None)
    monkeypatch.setattr(jobs_of(client), "find", lambda job: waiting if job == (step_task.TASK, params) else None)
    monkeypatch.setattr(jobs_of(client), "ahead", lambda job: 1 if job is waiting else None)
    box = client.get(f"{BASE}/smollm-progress?group_size=3&max_new_tokens=5&step=sample", headers={"HX-Request": "true"})
    assert "one run of this model at a time), 1 run ahead of it." in " ".join(soup(box).get_text(" ").split())


def test_the_panel_runs_r1_zero_from_the_pages_seed(client):
    """The step form's seed is the run's too (step s samples with seed + s), as the tiny LM's panel does."""
    panel = soup(client.get(f"{BASE}/steps/sample?seed=7")).select_one("#smol-paths")
    run = panel.select_one("form:has(#smol-path-run)")
    assert "seed=7" in run["action"] and "seed=7" in run["hx-post"]
    assert "Not computed yet for seed 7" in " ".join(panel.get_text(" ").split())
    assert jobs_of(client).find(r1_zero_job("cpu", 7)) is None, "a GET never starts the run"
    before = len(jobs_of(client).store.listing())
    assert client.post(f"{BASE}/paths/r1-zero?step=sample&seed=-1", follow_redirects=False).status_code == 404
    assert len(jobs_of(client).store.listing()) == before, "a refused seed stores nothing"
    started = client.post(f"{BASE}/paths/r1-zero?step=sample&seed=7", follow_redirects=False)
    assert started.status_code == 303 and "seed=7" in started.headers["location"]
    assert jobs_of(client).find(r1_zero_job("cpu", 7)) is not None
    assert jobs_of(client).find(r1_zero_job("cpu")) is None, "seed 7's run, not the default's"
