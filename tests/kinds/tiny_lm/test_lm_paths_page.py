"""The tiny LM's training paths on the page (issue 13; the length view since issue 22): choosing one
starts a real run on the server, its box reports stage and step while it runs (never cached), then
shows the length view, whose sentences are the run's own numbers (checked against the paths API).

Seed 3 is the page's own: a browser test of the same session reads the same jobs (computed once)."""
from __future__ import annotations

import re
import time

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from runs import start_default_runs

from app.house import create_app

pytestmark = pytest.mark.slower_tier  # `make test-slower`: whole training paths through the page (~3 min)

PAGE = "/walkthroughs/tiny_lm_grpo/steps/sample"
BOX = "/walkthroughs/tiny_lm_grpo/paths/r1-zero"
API = "/api/walkthroughs/tiny_lm_grpo/paths"
HX = {"HX-Request": "true"}
PAGE_LIMIT = 100 * 1024  # bytes on the wire, gzip (issue 22)


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app()) as c:
        start_default_runs(c.app, kinds=("tiny_lm",))  # as `python -m app` does at start-up (DEFAULT_RUNS)
        yield c


def wait_box(client, url: str, done, timeout_s: float = 400) -> BeautifulSoup:
    """Poll the box as the page does until `done(soup)`; while it is not, it is never cached."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get(url, headers=HX)
        assert r.status_code == 200
        soup = BeautifulSoup(r.text, "html.parser")
        if done(soup):
            return soup
        assert "no-store" in r.headers["cache-control"], url  # progress is never replayed by a cache
        assert time.monotonic() < deadline, f"{url}: not done after {timeout_s} s"
        time.sleep(1)


def curve(client, path: str, metric: str, query: str = "") -> list[float | None]:
    body = client.get(f"{API}/{path}?seed=3{query}").json()
    assert body["state"] == "done", body
    return [p["value"] for p in body["result"]["curves"][metric]]


def pct(v: float) -> str:
    return f"{round(100 * v)}%"


def test_a_path_runs_reports_progress_then_shows_its_length_view(client):
    first = client.get(BOX + "?seed=3", headers=HX)
    assert first.status_code == 200 and 'id="lm-path-panel"' in first.text
    if "lm-headline" not in first.text:
        assert 'hx-trigger="every 1s"' in first.text and "<progress" in first.text
    soup = wait_box(client, BOX + "?seed=3", lambda s: s.select_one("#lm-headline") is not None)
    box = soup.select_one("#lm-path-panel")
    assert box.get("hx-get") is None  # the box is done: only a section still running polls
    assert "harder task than the steps above" in soup.select_one("#lm-path-task").get_text(" ", strip=True)
    charts = [f["data-chart"] for f in box.select("figure[data-chart]")]
    assert charts[:2] == ["lm-fig3-length", "lm-fig3-accuracy"] and "lm-stepwise-by-difficulty" in charts
    folded = {f["data-chart"] for f in box.select("details#lm-more-curves figure")}
    assert folded == {"lm-format_rate", "lm-mixed_rate", "lm-recheck_share", "lm-entropy", "lm-kl_to_reference"}
    assert box.select_one("details#lm-more-curves #lm-path-stages") is not None
    # the headline is the API's numbers: accuracy and mean length, first point → last
    accuracy, length = curve(client, "r1-zero", "accuracy"), curve(client, "r1-zero", "mean_length")
    headline = soup.select_one("#lm-headline").get_text(" ", strip=True)
    assert f"{pct(accuracy[0])} → {pct(accuracy[-1])}" in headline
    assert f"from {length[0]:.1f} to {length[-1]:.1f} tokens" in headline or \
        f"({length[0]:.1f} → {length[-1]:.1f} tokens)" in headline
    verb = "rose" if accuracy[-1] - accuracy[0] >= 0.02 else "fell" if accuracy[0] - accuracy[-1] >= 0.02 else "held"
    assert headline.startswith(f"Accuracy {verb}")
    page = client.get(PAGE + "?process=r1-zero")  # the page shows the kept run at once
    assert page.status_code == 200 and 'id="lm-headline"' in page.text


def test_the_dr_grpo_run_follows_and_its_sentence_is_its_numbers(client):
    wait_box(client, BOX + "?seed=3", lambda s: s.select_one("#lm-headline") is not None)
    running = client.get(BOX + "?seed=3", headers=HX)
    soup = BeautifulSoup(running.text, "html.parser")
    if soup.select_one("#lm-dr-sentence") is None:  # its run goes on: only its section polls
        assert soup.select_one("#lm-dr-grpo")["hx-select"] == "#lm-dr-grpo"
        assert "no-store" in running.headers["cache-control"]
    soup = wait_box(client, BOX + "?seed=3", lambda s: s.select_one("#lm-dr-sentence") is not None)
    sentence = soup.select_one("#lm-dr-sentence").get_text(" ", strip=True)
    grpo = curve(client, "r1-zero", "mean_length_incorrect")
    dr = curve(client, "r1-zero", "mean_length_incorrect", "&preset=dr_grpo&beta=0.001")  # lm_plans.DR_GRPO
    assert sentence.startswith(f"Incorrect answers went {grpo[0]:.1f} → {grpo[-1]:.1f} tokens under GRPO")
    assert f"and {dr[0]:.1f} → {dr[-1]:.1f} under Dr. GRPO" in sentence
    assert "Liu et al. 2025 (Dr. GRPO, arXiv 2503.20783) report" in sentence
    grew_g, grew_d = grpo[-1] - grpo[0], dr[-1] - dr[0]
    said = re.search(r"this run (agrees|shows the opposite|shows no clear difference|cannot say)", sentence).group(1)
    more = grew_g - grew_d >= 1 and grew_g > 0
    assert said == ("agrees" if more else "shows the opposite" if grew_d - grew_g >= 1 else "shows no clear difference")
    assert ("in direction only" in sentence) == (more and grew_d >= 0.5 * grew_g)
    assert {f["data-chart"] for f in soup.select("#lm-dr-grpo figure")} == {"lm-dr-incorrect", "lm-dr-correct"}


def test_the_selector_lists_the_paths_and_the_overlay_and_refuses_others(client):
    page = client.get(PAGE)
    for title in ("R1-Zero", "R1", "Distillation"):
        assert f">{title}</a>" in page.text
    assert client.get(PAGE + "?path=ppo", follow_redirects=False).status_code == 404
    assert client.get(PAGE + "?process=r1-zero&overlay=some", follow_redirects=False).status_code == 404
    # an overlay needs a path: without one the page answers with its URL without it
    alone = client.get(PAGE + "?overlay=all", follow_redirects=False)
    assert alone.status_code == 303 and alone.headers["location"] == PAGE
    assert client.get("/walkthroughs/tiny_lm_grpo/paths/ppo").status_code == 404
    assert client.get("/walkthroughs/toy_grpo/paths/r1").status_code == 404
    assert client.get(BOX + "?overlay=some").status_code == 422
    assert client.post("/walkthroughs/tiny_lm_grpo/paths/r1?compare=dr_grpo", follow_redirects=False).status_code == 404
    # "Try again" on the Dr. GRPO run (its job is there, done: read, not rerun), then back to the box
    again = client.post(BOX + "?seed=3&compare=dr_grpo", follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"].endswith("process=r1-zero#lm-path-panel")


def test_a_shown_path_judges_its_examples_by_its_own_rule_and_marks_the_form(client):
    """Issue 20: the final model's examples carry the verdict of the path's reward rule, and the
    step's form says which fields the path does not read (all but the seed)."""
    wait_box(client, BOX + "?seed=3", lambda s: s.select_one("#lm-headline") is not None)
    page = BeautifulSoup(client.get(PAGE + "?process=r1-zero").text, "html.parser")
    heading = [h.get_text(" ", strip=True) for h in page.select("#lm-path-panel h4")]
    assert "What the final model writes, judged by R1-Zero's reward (accuracy + format)" in heading
    examples = page.select("#lm-path-panel .path-examples li")
    assert examples and all(re.match(r"^[0-9a-j]+(\+[0-9a-j]+)+=$", li.select_one("code").get_text())
                            for li in examples)  # the sums task's prompts
    verdicts = [v.get_text(" ", strip=True) for v in page.select("#lm-path-panel .path-examples .verdict")]
    assert verdicts and all("language" not in v or "(not counted)" in v for v in verdicts)
    assert all(v.split("→ r = ")[-1] in {"0", "1", "2"} for v in verdicts)
    show = page.select("#lm-showcase .showcase-list li")
    assert len(show) == 8 and all(re.match(r"^[✓✗] (right|wrong) · (step by step|guess|no template)",
                                           li.select_one(".mark").get_text()) for li in show)
    assert page.select_one("#token-form-path-note") is not None
    marked = {s["id"].removeprefix("tp-") for s in page.select("#token-form .not-for-path")}
    assert "seed" not in marked and {"group_size", "learning_rate", "inner_steps", "reward_parts"} <= marked
    plain = BeautifulSoup(client.get(PAGE).text, "html.parser")
    assert plain.select("#token-form .not-for-path") == [] and plain.select_one("#token-form-path-note") is None


@pytest.mark.slow
def test_the_overlay_draws_each_done_path_and_every_page_stays_under_100_kb(client):
    """All three paths run (R1 and distillation take a minute or two on two cores); then every step
    page with the R1-Zero box (its Dr. GRPO run done) and the overlay are each ≤ 100 KB gzip."""
    url = BOX + "?seed=3&overlay=all"
    soup = wait_box(client, url, lambda s: len(s.select("#lm-overlay-paths progress")) == 0
                    and s.select_one("#lm-overlay-paths") is not None, timeout_s=900)
    assert soup.select_one("#lm-path-panel").get("hx-get") is None
    assert soup.select("#lm-overlay-paths .error, #lm-overlay-paths code") == []  # no run failed
    charts = soup.select("#lm-path-panel figure[data-chart^='lm-overlay-']")
    assert len(charts) == 10
    for chart in charts:
        assert [g["data-series"] for g in chart.select("g.series")] == ["r1-zero", "r1", "distillation"]
    wait_box(client, BOX + "?seed=3", lambda s: s.select_one("#lm-dr-sentence") is not None)
    steps = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
    pages = [f"/walkthroughs/tiny_lm_grpo/steps/{s}?process=r1-zero" for s in steps]
    pages.append("/walkthroughs/tiny_lm_grpo/steps/update?process=r1-zero&overlay=all")
    for page in pages:
        r = client.get(page, headers={"Accept-Encoding": "gzip"})
        assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
        assert r.num_bytes_downloaded <= PAGE_LIMIT, (page, r.num_bytes_downloaded)
        doc = BeautifulSoup(r.text, "html.parser")
        assert doc.select_one("#lm-headline") is not None
        loads = [t.get("src") or t.get("href") for t in doc.select("script[src], link[href], img[src], iframe")]
        assert loads and all(u and u.startswith("/") and not u.startswith("//") for u in loads), loads  # the app only
