"""A GET never starts expensive work (docs/explanation/jobs.md, "A fair, bounded queue"): a link to a
path or a page that reads runs nobody started shows what it would compute and a Run button (POST),
or, in the API, a 404 naming the POST; the POST starts it, limited per client (429 + Retry-After) and
by the queue's bound (503 + Retry-After, nothing stored)."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from runs import jobs_of

from app.house import create_app
from app.web.settings import Settings

TOY_PATH = "/api/walkthroughs/toy_grpo/paths/{}"
# Every GET that reads toy or tiny-LM runs: pages, fragments and the JSON API
READS = [
    "/walkthroughs/toy_grpo/steps/clip?process=r1&seed=5",
    "/walkthroughs/toy_grpo/steps/advantages?process=r1-zero&stage=rl&seed=6",
    "/api/walkthroughs/toy_grpo/paths/r1?seed=7",
    "/api/walkthroughs/toy_grpo/step?process=r1&stage=cold-start&seed=3",
    "/api/processes/compare?seed=9&iterations_scale=8",
    "/api/processes/distillation?seed=9",
    "/walkthroughs/tiny_lm_grpo/steps/sample?process=r1&seed=4",
    "/walkthroughs/tiny_lm_grpo/steps/sample?process=r1-zero&seed=4&overlay=all",
    "/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=3",
    "/api/walkthroughs/tiny_lm_grpo/paths/distillation?seed=3",
]


def client_of(tmp_path, host: str = "10.0.0.1", **settings) -> TestClient:
    app = create_app(Settings(device="cpu", data_dir=tmp_path / "data", **settings))
    return TestClient(app, client=(host, 50000), follow_redirects=False)


def rows(client) -> int:
    return len(jobs_of(client).store.listing())


@pytest.mark.parametrize("url", READS)
def test_a_get_of_runs_nobody_started_creates_no_job_and_says_how_to_start_them(tmp_path, url):
    client = client_of(tmp_path)
    r = client.get(url)
    assert rows(client) == 0, f"GET {url} queued a job"
    assert r.headers["cache-control"].startswith("no-store")  # a POST may start it a second later
    if url.startswith("/api/"):
        assert r.status_code == 404, r.text
        body = r.json()
        assert body["start"].startswith("POST /api/") and body["runs"], body
        assert "never starts a run" in body["error"]
    else:
        assert r.status_code == 200, r.text
        assert 'method="post"' in r.text and "Run" in r.text
        assert "Not computed yet" in r.text


def test_the_pages_run_button_starts_the_runs_then_the_same_address_opens_them(tmp_path):
    client = client_of(tmp_path)
    url = "/walkthroughs/toy_grpo/steps/clip?process=r1&seed=5"
    r = client.post(url)
    assert r.status_code == 303 and r.headers["location"] == url
    assert rows(client) == 3  # every path's run: the page compares their ends
    page = client.get(url)
    assert page.status_code == 200 and "Not computed yet" not in page.text and 'id="step-panel"' in page.text
    assert rows(client) == 3


def test_the_path_apis_post_starts_a_run_that_its_get_then_reads(tmp_path):
    client = client_of(tmp_path)
    r = client.post(TOY_PATH.format("r1") + "?seed=7")
    assert r.status_code in (200, 202) and r.json()["state"] in ("queued", "running", "done")
    assert rows(client) == 1
    assert client.get(TOY_PATH.format("r1") + "?seed=7").status_code in (200, 202)
    assert rows(client) == 1


def test_the_tiny_lm_box_offers_run_and_its_post_queues_the_path_with_its_dr_grpo_twin(tmp_path):
    client = client_of(tmp_path)
    box = client.get("/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=3")
    assert 'id="lm-path-start"' in box.text and 'hx-post="/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=3"' in box.text
    assert rows(client) == 0
    jobs_of(client).mode = "off"  # queue only: no runner thread trains for twenty seconds in this test
    r = client.post("/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=3", headers={"HX-Request": "true"})
    assert r.status_code == 200 and 'id="lm-path-start"' not in r.text and "<progress" in r.text
    assert sorted(j.title for j in jobs_of(client).store.listing()) == sorted(
        [j.title for j in jobs_of(client).store.listing() if "r1-zero" in j.title])
    assert rows(client) == 2  # R1-Zero and the same run under Dr. GRPO's conventions


def test_a_client_past_its_share_gets_429_with_retry_after_and_nothing_is_stored(tmp_path):
    client = client_of(tmp_path, job_starts_burst=3, job_starts_per_min=6)
    jobs_of(client).mode = "off"
    for seed in range(3):
        assert client.post(TOY_PATH.format("r1") + f"?seed={seed}").status_code == 202
    r = client.post(TOY_PATH.format("r1") + "?seed=99")
    assert r.status_code == 429 and int(r.headers["retry-after"]) == 10  # one start per 10 s at 6 a minute
    assert rows(client) == 3
    assert client.post(TOY_PATH.format("r1") + "?seed=1").status_code == 202  # already started: free
    other = TestClient(client.app, client=("10.0.0.2", 50000))
    assert other.post(TOY_PATH.format("r1") + "?seed=99").status_code == 202  # another client's own share
    assert client.post("/walkthroughs/toy_grpo/steps/clip?process=r1&seed=50").status_code == 429  # pages too


def test_past_the_queues_bound_a_post_gets_503_with_retry_after_and_nothing_is_stored(tmp_path):
    client = client_of(tmp_path, job_queue_max=2)
    jobs_of(client).mode = "off"
    assert client.post(TOY_PATH.format("r1") + "?seed=1").status_code == 202
    assert client.post(TOY_PATH.format("r1") + "?seed=2").status_code == 202
    r = client.post(TOY_PATH.format("r1") + "?seed=3")
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
    assert "nothing was queued" in r.json()["error"]
    assert rows(client) == 2
    page = client.post("/walkthroughs/toy_grpo/steps/clip?process=r1&seed=8")
    assert page.status_code == 503 and rows(client) == 2


def test_the_server_queues_its_default_runs_itself_at_start_up(tmp_path):
    app = create_app(Settings(device="cpu", data_dir=tmp_path / "data", default_runs=True))
    jobs = app.state.context.jobs
    jobs.mode = "off"
    with TestClient(app):  # the lifespan: what `python -m app` runs at start-up
        titles = sorted(j.title for j in jobs.store.listing())
        assert all(j.keep and j.client == "server" for j in jobs.store.listing())
    assert "toy r1 seed 10" in titles and "toy r1 seed 0" in titles
    assert sum("tiny_lm" in t for t in titles) == 4, titles  # three paths and R1-Zero's Dr. GRPO twin
