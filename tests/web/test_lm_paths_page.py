"""The tiny LM's training paths on the page (issue 13): choosing one starts a real run on the
server, its box reports stage and step while it runs (never cached), then shows the curves."""
from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from app.web.factory import create_app

PAGE = "/walkthroughs/tiny_lm_grpo/steps/sample"


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app()) as c:
        yield c


def test_a_path_runs_reports_progress_then_shows_its_curves(client):
    box = "/walkthroughs/tiny_lm_grpo/paths/r1_zero?seed=1"
    first = client.get(box, headers={"HX-Request": "true"})
    assert first.status_code == 200 and 'id="lm-path-panel"' in first.text
    seen_running = False
    deadline = time.monotonic() + 240
    while True:
        r = client.get(box, headers={"HX-Request": "true"})
        if "Ran in" in r.text:
            break
        seen_running = True
        assert "no-store" in r.headers["cache-control"]  # progress is never replayed by a cache
        assert 'hx-trigger="every 1s"' in r.text and "<progress" in r.text
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(1)
    assert seen_running or "Ran in" in first.text
    for chart in ("lm-accuracy", "lm-format_rate", "lm-mixed_rate", "lm-mean_length", "lm-entropy",
                  "lm-kl_to_reference"):
        assert f'data-chart="{chart}"' in r.text
    assert 'id="lm-path-stages"' in r.text and "hx-trigger" not in r.text
    page = client.get(PAGE + "?seed=1&path=r1_zero")  # the page shows the cached run at once
    assert page.status_code == 200 and "Ran in" in page.text and "no-store" not in page.headers.get("cache-control", "")


def test_the_selector_lists_the_three_paths_and_refuses_others(client):
    page = client.get(PAGE)
    for title in ("R1-Zero", "R1", "Distillation"):
        assert f">{title}</a>" in page.text
    assert client.get(PAGE + "?path=ppo", follow_redirects=False).status_code == 404
    assert client.get("/walkthroughs/tiny_lm_grpo/paths/ppo").status_code == 404
    assert client.get("/walkthroughs/toy_grpo/paths/r1").status_code == 404


def test_a_shown_path_judges_its_examples_by_its_own_rule_and_marks_the_form(client):
    """Issue 20: the final model's examples carry the verdict of the path's reward rule, and the
    step's form says which fields the path does not read (all but the seed)."""
    from bs4 import BeautifulSoup

    box = "/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed=1"
    deadline = time.monotonic() + 240
    while "Ran in" not in client.get(box, headers={"HX-Request": "true"}).text:
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(1)
    page = BeautifulSoup(client.get(PAGE + "?seed=1&process=r1-zero").text, "html.parser")
    heading = page.select_one("#lm-path-panel h4").get_text(" ", strip=True)
    assert heading == "What the final model writes, judged by R1-Zero's reward (accuracy + format)"
    verdicts = [v.get_text(" ", strip=True) for v in page.select("#lm-path-panel .path-examples .verdict")]
    assert verdicts and all("language" not in v or "(not counted)" in v for v in verdicts)
    assert all(v.split("→ r = ")[-1] in {"0", "1", "2"} for v in verdicts)
    assert page.select_one("#token-form-path-note") is not None
    marked = {s["id"].removeprefix("tp-") for s in page.select("#token-form .not-for-path")}
    assert "seed" not in marked and {"group_size", "learning_rate", "inner_steps", "reward_parts"} <= marked
    plain = BeautifulSoup(client.get(PAGE + "?seed=1").text, "html.parser")
    assert plain.select("#token-form .not-for-path") == [] and plain.select_one("#token-form-path-note") is None
