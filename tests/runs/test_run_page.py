"""The run explorer (issue 34) in Chromium at 390×844, 1280×720 and 1920×1080, on the shipped TRL run (120 steps,
4 recorded): the findings are in the first view; nothing scrolls sideways; following a finding's step selects it
(its table in view, the metric's logged value in it); zoom draws every point of the window; a recorded step's
button opens its walkthrough; no failed or off-site request; axe finds nothing serious. Screenshots:
test-output/screenshots/run/<view>-<size>.png (first view) and …-full.png (the whole page)."""
from __future__ import annotations

import json

import pytest
from axe_playwright_python.sync_playwright import Axe
from browser_helpers import axe_blocking, describe
from paths import ROOT
from playwright.sync_api import expect
from run_browser import NO_SIDEWAYS_SCROLL, SIZES, bad_requests, example_run_url, shoot, top_in_view

from app.runs.examples import RUN_EXAMPLE
from app.views.numbers import significant

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "run"
KL = {e["step"]: e["kl"] for e in json.loads(RUN_EXAMPLE.read_text())["log_history"] if "kl" in e}


@pytest.fixture(scope="module")
def run_url(base_url) -> str:
    return example_run_url(base_url)


@pytest.mark.parametrize("size", SIZES)
def test_findings_first_a_finding_selects_its_step_and_zoom_shows_every_point(make_context, base_url, run_url, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    bad = bad_requests(page, base_url)
    page.goto(run_url)
    expect(page.locator("h1")).to_have_text("A GRPO run: 120 logged steps")
    assert top_in_view(page, "#findings-title") and top_in_view(page, "#run-findings li.finding")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    expect(page.locator("figure.run-chart")).to_have_count(27)
    shoot(page, SHOTS, "whole", size)

    page.locator("li.finding[data-rule='kl_spike'] a.finding-step").click()
    page.wait_for_url("**?step=115#selected-step")
    assert top_in_view(page, "#selected-step"), "the selected step's table is where the link lands"
    expect(page.locator(".run-step-table tr:has(code:text-is('kl')) td")).to_have_text(significant(KL[115], 5))
    expect(page.locator("figure[data-metric='kl'] a.run-dot.is-selected")).to_have_count(1)
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    shoot(page, SHOTS, "selected-115", size)

    page.locator("input[name='from']").fill("100")
    page.locator("input[name='to']").fill("120")
    page.locator(".run-zoom button").click()
    page.wait_for_url("**from=100&to=120**")
    kl = page.locator("figure[data-metric='kl']")
    expect(kl.locator("a.run-dot")).to_have_count(21)
    expect(kl.locator(".run-chart-cut")).to_have_text("All 21 logged points.")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    shoot(page, SHOTS, "zoomed-100-120", size)
    assert not bad, bad


def test_a_recorded_steps_button_opens_its_walkthrough(page, base_url, run_url):
    page.goto(run_url + "?step=90#selected-step")
    page.locator(".run-step-record a.btn").click()
    page.wait_for_url("**/steps/group**")
    expect(page.locator(".view-content")).to_have_attribute("data-step-id", "group")
    expect(page.locator("body")).to_contain_text("step 90")


@pytest.mark.parametrize("size", ("phone", "laptop"))
def test_axe_finds_no_serious_violations_on_the_run_explorer(make_context, run_url, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    urls = [run_url, run_url + "?step=60", run_url + "?from=100&to=120&step=115"]
    blocking = axe_blocking(page, Axe(), urls, lambda p: p.wait_for_load_state("load"))
    assert not blocking, "\n\n".join(f"{url}\n{describe(vs)}" for url, vs in blocking.items())
