"""The diff of two recorded steps (issue 34) in Chromium at 390×844, 1280×720 and 1920×1080, on the shipped TRL run:
reached from the explorer's "Compare two recorded steps" form; nothing scrolls sideways; the first histogram is in
the first view, under its section's heading; every chart label draws at 11 px or more; the links lead to each
step in the explorer and to its walkthrough; no failed or off-site request; axe finds nothing serious.
Screenshots: test-output/screenshots/run-diff/<view>-<size>.png (first view) and …-full.png (the whole page)."""
from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from browser_helpers import axe_blocking, describe
from paths import ROOT
from playwright.sync_api import expect
from run_browser import NO_SIDEWAYS_SCROLL, SIZES, bad_requests, example_run_url, shoot, top_in_view

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "run-diff"
# the smallest label of any histogram as drawn: its font size times the SVG's scale on screen
SMALLEST_LABEL = """() => Math.min(...[...document.querySelectorAll('svg.run-diff-svg')].flatMap(svg => {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    return [...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale); }))"""


@pytest.fixture(scope="module")
def run_url(base_url) -> str:
    return example_run_url(base_url)


@pytest.mark.parametrize("size", SIZES)
def test_the_explorers_form_opens_the_diff_with_its_histograms_in_view(make_context, base_url, run_url, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    bad = bad_requests(page, base_url)
    page.goto(run_url)
    form = page.locator("#run-recorded form.run-diff-form")
    expect(form.locator("select[name='a']")).to_have_value("30")
    expect(form.locator("select[name='b']")).to_have_value("120")
    form.locator("select[name='b']").select_option("60")
    form.locator("button").click()
    page.wait_for_url("**/diff?a=30&b=60")
    expect(page.locator("h1")).to_have_text("Step 30 against step 60")
    assert top_in_view(page, "#run-diff-dists-title", room=60) and top_in_view(page, "svg.run-diff-svg", room=60)
    expect(page.locator("svg.run-diff-svg")).to_have_count(6)
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    assert page.evaluate(SMALLEST_LABEL) >= 11
    expect(page.locator("#run-diff-prompts-line")).to_contain_text("1 prompt appears at both steps")
    shoot(page, SHOTS, "30-60", size)

    page.goto(run_url + "/diff?a=30&b=120")
    expect(page.locator("#run-diff-prompts-line")).to_contain_text("have no prompt in common")
    assert page.evaluate(NO_SIDEWAYS_SCROLL) and page.evaluate(SMALLEST_LABEL) >= 11
    shoot(page, SHOTS, "30-120", size)
    assert not bad, bad


def test_the_diff_links_each_step_to_the_explorer_and_its_walkthrough(page, run_url):
    page.goto(run_url + "/diff?a=30&b=90")
    page.locator(".run-diff-links span", has_text="Step 90").get_by_role("link", name="in the explorer").click()
    page.wait_for_url("**?step=90#selected-step")
    expect(page.locator("#selected-title")).to_have_text("Step 90")
    page.go_back()
    page.locator(".run-diff-links span", has_text="Step 30").get_by_role("link", name="its tokens").click()
    page.wait_for_url("**/steps/group**")
    expect(page.locator("body")).to_contain_text("step 30")


@pytest.mark.parametrize("size", ("phone", "laptop"))
def test_axe_finds_no_serious_violations_on_the_diff(make_context, run_url, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    urls = [run_url + "/diff?a=30&b=60", run_url + "/diff?a=30&b=120"]
    blocking = axe_blocking(page, Axe(), urls, lambda p: p.wait_for_load_state("load"))
    assert not blocking, "\n\n".join(f"{url}\n{describe(vs)}" for url, vs in blocking.items())
