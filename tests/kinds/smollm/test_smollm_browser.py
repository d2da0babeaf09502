"""The real-model walkthrough in Chromium at 390x844, 1280x720 and 1920x1080, on the suite's tiny GGUF:
a computed step (its Run POSTed once for the module) opens on every step with its figure in the first
view and nothing scrolling sideways; a step nobody computed offers Run, shows its
progress and opens itself when done. Screenshots land in test-output/screenshots/."""
from __future__ import annotations

import urllib.request
from urllib.parse import parse_qsl, urlsplit

import pytest
from browser_helpers import wait_settled

pytestmark = pytest.mark.browser

BASE = "/walkthroughs/smollm_grpo"
STEPS = {"sample": "#group-answers", "advantages": "#group-advantages", "ratio": "#token-ratios",
         "blocks": "#block-gradients", "attention": "#attention-heads", "update": "#moved-tokens"}
SIZES = {"390x844": (390, 844), "1280x720": (1280, 720), "1920x1080": (1920, 1080)}
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"


QUERY = "group_size=4&max_new_tokens=12"


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    """The repository's walkthroughs folder (smollm_grpo among them), with QUERY's step started (a POST,
    as the page's Run does; the pages wait for it to finish)."""
    request = urllib.request.Request(f"{repo_base_url}{BASE}/steps/sample?{QUERY}", method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:  # follows the 303 to the page
        assert answer.status == 200
    return repo_base_url


def finished(page, path: str) -> None:
    """Open `path`, waiting (the default step may still run) until the page shows the recorded step."""
    page.goto(path)
    page.wait_for_selector("#smol-model q", timeout=120_000)  # the progress box opens the finished page
    wait_settled(page)


@pytest.mark.parametrize("size", list(SIZES))
def test_every_step_shows_its_figure_first_without_sideways_scroll(make_context, shot, size):
    width, height = SIZES[size]
    page = make_context(viewport={"width": width, "height": height}).new_page()
    for step, figure in STEPS.items():
        finished(page, f"{BASE}/steps/{step}?{QUERY}")
        box = page.locator(figure).bounding_box()
        assert box is not None and box["y"] < height, (step, box)  # the figure starts in the first view
        assert page.evaluate(NO_SIDEWAYS_SCROLL), step
        assert page.locator("#graph-stage .graph-frame").count() == 1
        shot(page, step)


def test_a_step_nobody_computed_runs_from_its_button_and_opens_itself(make_context):
    page = make_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto(f"{BASE}/steps/advantages?group_size=2&max_new_tokens=6&seed=5")
    assert page.locator("#smol-model q").count() == 0
    page.locator("#smol-start").click()
    page.wait_for_selector("#group-advantages", timeout=120_000)
    url = urlsplit(page.url)
    assert url.path == f"{BASE}/steps/advantages"
    assert dict(parse_qsl(url.query)) == {"group_size": "2", "max_new_tokens": "6", "seed": "5"}
    assert page.locator("#group-advantages tbody tr").count() == 2
    assert page.evaluate(NO_SIDEWAYS_SCROLL)


@pytest.mark.slower_tier  # the default R1-Zero run: 20 steps of G 8 x 32 on the tiny GGUF, ~40 s
def test_r1_zero_runs_from_the_panel_and_the_reader_stays_where_they_waited(make_context, shot):
    page = make_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto(f"{BASE}/steps/sample?process=r1-zero#smol-paths")
    wait_settled(page)
    page.locator("#smol-path-run").scroll_into_view_if_needed()
    page.locator("#smol-path-run").click()
    page.wait_for_selector("#smol-path-progress, #smol-findings", timeout=30_000)
    waited_at = page.evaluate("window.scrollY")
    page.wait_for_selector("#smol-findings", timeout=300_000)
    wait_settled(page)
    assert abs(page.evaluate("window.scrollY") - waited_at) < 200, "the finished run must not move the page"
    top = page.locator("#smol-paths").bounding_box()
    assert top is not None and top["y"] < 844 and top["y"] + top["height"] > 0, "the panel is still in view"
    assert page.locator("#smol-curves figure").count() == 3
    assert page.locator("#smol-run-prompts tbody tr").count() == 6
    assert page.locator("#smol-findings li").first.inner_text().startswith("Mean reward over one pass of the 6 prompts")
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{BASE}/steps/sample?process=r1-zero#smol-paths")
        wait_settled(page)
        assert page.evaluate(NO_SIDEWAYS_SCROLL), size
        page.locator("#smol-paths").scroll_into_view_if_needed()
        shot(page, f"r1-zero-{size}")
