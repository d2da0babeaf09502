"""The one path API of every kind (POST /api/walkthroughs/{id}/paths/{path} starts, GET reads), in-process
(runner threads, JOB_RUNNER=thread): 202 while queued or running, 200 when done with the result, the same
numbers the toy's own API gives; typed in OpenAPI; refusals; and a failing job (a fault injected
in the task) shown as failed with its error, on the API and on the page, then started again."""
from __future__ import annotations

import dataclasses
import time

import pytest
from runs import jobs_of

TOY = "/api/walkthroughs/toy_grpo/paths/{}"
LM = "/api/walkthroughs/tiny_lm_grpo/paths/{}"


@pytest.fixture(scope="module")
def client(make_client, tmp_path_factory):
    return make_client(data_dir=tmp_path_factory.mktemp("jobs"))


def poll(client, url: str, timeout: float = 120.0) -> list[dict]:
    """Start the path (a POST: a GET never does), then read it until it is finished."""
    started = client.post(url)
    assert started.status_code in (200, 202), started.text
    bodies, deadline = [], time.monotonic() + timeout
    while True:
        r = client.get(url)
        assert r.status_code in (200, 202), r.text
        body = r.json()
        assert (r.status_code == 202) == (body["state"] in ("queued", "running"))
        bodies.append(body)
        if r.status_code == 200:
            return bodies
        assert "no-store" in r.headers["cache-control"]
        assert time.monotonic() < deadline, f"not done after {timeout} s: {body}"
        time.sleep(0.1)


def test_a_toy_path_is_a_job_with_the_same_numbers_as_the_toy_api(client):
    bodies = poll(client, TOY.format("r1") + "?seed=4")
    done = bodies[-1]
    assert done["state"] == "done" and done["error"] is None and done["progress"]["fraction"] == 1.0
    assert done["run"]["attempts"] == 1 and ":" in done["run"]["computed_by"] and done["run"]["seconds"] > 0
    direct = client.get("/api/processes/r1?seed=4").json()
    assert done["result"] == direct
    again = client.get(TOY.format("r1") + "?seed=4").json()
    assert again["run"] == done["run"]  # read from the store, not run again


def test_a_tiny_lm_path_reports_progress_that_never_decreases(client):
    bodies = poll(client, LM.format("r1-zero") + "?seed=11&scale=0.05", timeout=240)
    fractions = [b["progress"]["fraction"] for b in bodies]
    assert fractions == sorted(fractions)
    result = bodies[-1]["result"]
    assert result["path"] == "r1-zero" and result["seed"] == 11 and result["stages"][0]["id"] == "rl"
    assert {"accuracy", "mean_length", "kl_to_reference"} <= set(result["final"])
    # issue 22: {metric: [{step, value}]} over the path, and the same per number of operands
    metrics = {"accuracy", "mean_length", "mean_length_correct", "mean_length_incorrect", "stepwise_share",
               "entropy", "kl_to_reference"}
    assert metrics <= set(result["curves"]) and set(result["by_difficulty"]) == {"2", "3", "4", "5", "6"}
    curve = result["curves"]["mean_length"]
    assert [p["step"] for p in curve] == sorted(p["step"] for p in curve) and curve[0]["step"] == 0
    assert all(isinstance(p["value"], float) for p in curve)
    assert result["curves"]["accuracy"][-1]["value"] == result["final"]["accuracy"]
    for n, curves in result["by_difficulty"].items():
        assert metrics <= set(curves) and len(curves["accuracy"]) == len(curve), n
    assert result["conventions"]["preset"] == "deepseekmath" and result["conventions"]["beta"] == 0.001


def test_a_path_takes_the_conventions_as_a_preset_and_overrides(client):
    """Dr. GRPO's conventions for every GRPO stage: another job (another id) than the default's, and
    the result says which conventions it ran with; an override beats the preset."""
    url = LM.format("r1-zero") + "?seed=11&scale=0.05"
    default = poll(client, url, timeout=240)[-1]
    dr = poll(client, url + "&preset=dr_grpo&beta=0.001", timeout=240)[-1]
    assert dr["run"]["id"] != default["run"]["id"]
    used = dr["result"]["conventions"]
    assert (used["preset"], used["loss_aggregation"], used["advantage_std"], used["beta"]) == \
        ("dr_grpo", "token_sum_norm", "none", 0.001)
    assert used["max_length"] == 56  # the completions' token budget: Dr. GRPO's constant normaliser
    assert dr["result"]["curves"]["mean_length"] != default["result"]["curves"]["mean_length"]
    same = client.get(url + "&beta=0.001").json()  # R1's beta is the default: the same job
    assert same["run"]["id"] == default["run"]["id"]


def test_the_paths_api_is_typed_in_openapi(client):
    spec = client.get("/openapi.json").json()
    get = spec["paths"]["/api/walkthroughs/{walkthrough_id}/paths/{path}"]["get"]
    for code in ("200", "202"):
        assert get["responses"][code]["content"]["application/json"]["schema"]["$ref"].endswith("/PathJobBody")
    body = spec["components"]["schemas"]["PathJobBody"]["properties"]
    assert set(body) == {"state", "progress", "run", "result", "error"}
    assert {p["name"] for p in get["parameters"]} >= {"seed", "scale", "iterations_scale", "preset",
                                                      "loss_aggregation", "advantage_std", "beta"}
    assert "post" in spec["paths"]["/api/walkthroughs/{walkthrough_id}/paths/{path}"]


@pytest.mark.parametrize(("url", "status", "words"), [
    (TOY.format("ppo"), 404, "no training path 'ppo'"),
    ("/api/walkthroughs/nope/paths/r1", 404, "nope"),
    (TOY.format("r1") + "?scale=0.5", 422, "scale"),
    (LM.format("r1") + "?iterations_scale=2", 422, "iterations_scale"),
    (LM.format("r1") + "?scale=2", 422, "scale: 2 is outside"),
    (TOY.format("r1") + "?iterations_scale=9", 422, "iterations_scale"),
    (TOY.format("r1") + "?seed=-1", 422, "seed"),
    (TOY.format("r1") + "?clip_eps=0.3", 422, "clip_eps"),
    (LM.format("r1") + "?preset=ppo", 422, "preset"),
    (LM.format("r1") + "?beta=-1", 422, "beta"),
    (LM.format("r1") + "?loss_aggregation=median", 422, "loss_aggregation"),
    (TOY.format("r1") + "?preset=dr_grpo", 422, "process catalog"),
])
def test_refusals_name_what_is_wrong(client, url, status, words):
    r = client.get(url)
    assert r.status_code == status and words in r.json()["error"]


def test_a_failing_job_is_shown_failed_with_its_error_and_starts_again_on_request(make_client, tmp_path,
                                                                                  monkeypatch):
    client = make_client(data_dir=tmp_path / "data")
    real = jobs_of(client).tasks["lm_path"]
    calls = []

    def fails_once(params, progress):
        calls.append(params.seed)
        if len(calls) == 1:
            raise RuntimeError("injected fault: the GPU fell off")
        return real.run(params, progress)

    monkeypatch.setitem(jobs_of(client).tasks, "lm_path", dataclasses.replace(real, run=fails_once))
    url = LM.format("r1-zero") + "?seed=13&scale=0.03"
    failed = poll(client, url)[-1]
    assert failed["state"] == "failed" and failed["result"] is None
    assert failed["error"] == "RuntimeError: injected fault: the GPU fell off"
    assert client.get(url).json()["state"] == "failed" and calls == [13]  # never retried by itself

    # The page's box says so and offers to try again (the page's own run is scale 1: same job id scheme)
    monkeypatch.setitem(jobs_of(client).tasks, "lm_path", dataclasses.replace(real, run=fails_once))
    retried = client.post(url)
    assert retried.status_code == 202 and retried.json()["state"] in ("queued", "running")
    done = poll(client, url, timeout=240)[-1]
    assert done["state"] == "done" and done["error"] is None and calls == [13, 13]
    assert done["run"]["attempts"] == 1  # the new run's claims: it ran once


def test_a_failed_run_on_the_page_shows_its_error_and_a_try_again_button(make_client, tmp_path, monkeypatch):
    client = make_client(data_dir=tmp_path / "data")
    real = jobs_of(client).tasks["lm_path"]
    failing = dataclasses.replace(real, run=lambda params, progress: 1 / 0)
    monkeypatch.setitem(jobs_of(client).tasks, "lm_path", failing)
    box = "/walkthroughs/tiny_lm_grpo/paths/r1?seed=17"
    assert 'id="lm-path-start"' in client.get(box, headers={"HX-Request": "true"}).text  # Run, not started
    assert client.post(box, headers={"HX-Request": "true"}).status_code == 200  # its Run button
    deadline = time.monotonic() + 60
    while "The run failed" not in (r := client.get(box, headers={"HX-Request": "true"})).text:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert "ZeroDivisionError: division by zero" in r.text and "Try again</button>" in r.text
    assert 'hx-post="/walkthroughs/tiny_lm_grpo/paths/r1?seed=17"' in r.text
    assert "hx-trigger" not in r.text and "no-store" in r.headers["cache-control"]
    page = client.post(box, follow_redirects=False)
    assert page.status_code == 303 and "process=r1#lm-path-panel" in page.headers["location"]
    assert client.get(LM.format("r1") + "?seed=17").json()["state"] in ("queued", "running", "failed")
