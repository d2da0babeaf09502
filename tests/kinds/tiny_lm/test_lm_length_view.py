"""The tiny LM's paths box as a length view (issue 22), in Chromium at a phone's and a laptop's size:
once the box is scrolled to, its first view holds the headline and the Figure-3 pair (length and
accuracy against step: side by side on the laptop, stacked on the phone); nothing scrolls sideways;
chart text is at least 11 px on screen and the lines' labels do not cover each other. Then the
Dr. GRPO comparison, "More curves" and the overlay of the three paths.

Real runs, through the page's own polling: R1-Zero and its Dr. GRPO run (about 20 s each on two
cores), for the overlay R1 and distillation too (a minute or two). Jobs are kept in the session's
store, so each runs once per session. Screenshots: test-output/screenshots/lm-length-<size>-*.png.
"""
from __future__ import annotations

import pytest
from browser_helpers import wait_settled
from paths import ROOT
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.slower_tier]  # `make test-slower`: whole training paths through the page (~3.5 min)

SCREENSHOTS = ROOT / "test-output" / "screenshots"  # as conftest's `shot`
PAGE = "/walkthroughs/tiny_lm_grpo/steps/sample?process=r1-zero"
SIZES = {"phone": (390, 844), "laptop": (1280, 720)}
RUN_MS = 600_000  # a run's ceiling on a slow shared machine; it usually takes 20 s
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"
# Every chart text's size on screen (font size times the SVG's scale), and whether it lies inside its SVG.
CHART_TEXT = """root => [...root.querySelectorAll('svg text')].filter(t => t.textContent.trim()).map(t => {
  const svg = t.ownerSVGElement.getBoundingClientRect(), r = t.getBoundingClientRect();
  const m = t.getScreenCTM();  // hypot: a y-axis label is rotated
  return {text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b),
          inside: r.left >= svg.left - 1 && r.right <= svg.right + 1 && r.top >= svg.top - 1 && r.bottom <= svg.bottom + 1};
})"""
SERIES_LABELS = """fig => [...fig.querySelectorAll('.series-label')].map(t => {
  const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.top, r.right, r.bottom]; })"""
RECT = "e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; }"


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    return repo_base_url


def overlapping(labels) -> list:
    return [(a[0], b[0]) for i, a in enumerate(labels) for b in labels[i + 1:]
            if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]]


def expect_readable(page, selector: str) -> None:
    for root in page.locator(selector).all():
        texts = root.evaluate(CHART_TEXT)
        assert texts, selector
        small = [(t["text"], round(t["px"], 1)) for t in texts if t["px"] < 10.95]
        assert not small, f"{selector}: chart text under 11 px: {small}"
        assert all(t["inside"] for t in texts), [t["text"] for t in texts if not t["inside"]]
        for fig in root.locator("figure.curve-chart").all():
            assert not overlapping(fig.evaluate(SERIES_LABELS)), fig.get_attribute("data-chart")


def first_view(page, size: str) -> None:
    """Scroll the box's top to the viewport's top; the headline and both charts are then inside it."""
    page.locator("#lm-path-panel").evaluate("e => e.scrollIntoView({block: 'start'})")
    height = page.evaluate("innerHeight")
    box = page.locator("#lm-path-panel").evaluate(RECT)
    assert abs(box["top"]) <= 1, box
    headline, pair = page.locator("#lm-headline").evaluate(RECT), page.locator("#lm-fig3").evaluate(RECT)
    assert 0 <= headline["top"] < headline["bottom"] <= pair["top"], (headline, pair)
    assert pair["bottom"] <= height, f"{size}: the Figure-3 pair ends at {pair['bottom']:.0f} px of {height}"
    length = page.locator('[data-chart="lm-fig3-length"]').evaluate(RECT)
    accuracy = page.locator('[data-chart="lm-fig3-accuracy"]').evaluate(RECT)
    if size == "laptop":  # side by side
        assert abs(length["top"] - accuracy["top"]) <= 1 and accuracy["left"] >= length["right"], (length, accuracy)
    else:  # stacked, the length first
        assert accuracy["top"] >= length["bottom"] - 1, (length, accuracy)


@pytest.mark.parametrize("size", SIZES)
def test_the_length_view_makes_its_point_in_the_first_view(make_context, size):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    page.set_default_timeout(30_000)
    page.goto(PAGE)
    run = page.locator("#lm-path-start button")
    if run.count():  # nobody has started R1-Zero yet (a link never does): the box's Run, as a reader would
        run.click()
        page.wait_for_selector("#lm-path-start", state="detached")
    # the box polls until R1-Zero is done, then its Dr. GRPO section polls until that run is
    page.wait_for_selector("#lm-headline", timeout=RUN_MS)
    page.wait_for_selector("#lm-dr-sentence", timeout=RUN_MS)
    page.reload()  # the finished page as a visitor gets it
    wait_settled(page)
    expect(page.locator("#lm-path-task")).to_contain_text("harder task than the steps above")
    expect(page.locator("#lm-headline")).to_contain_text("Accuracy")
    first_view(page, size)
    assert page.evaluate(NO_SIDEWAYS_SCROLL), page.evaluate("() => [document.scrollingElement.scrollWidth, innerWidth]")
    expect_readable(page, "#lm-fig3")
    page.screenshot(path=str(SCREENSHOTS / f"lm-length-{size}-first-view.png"), caret="initial")

    # below the first view: by difficulty, the start's habits, the showcase, GRPO against Dr. GRPO
    expect_readable(page, "#lm-path-panel .lm-pair:has(figure)")
    for table in ("#lm-by-difficulty", "#lm-start-habits"):
        fits = page.locator(table).evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth + 1")
        assert fits, f"{size}: {table} scrolls sideways"
    expect(page.locator("#lm-showcase .showcase-list li")).to_have_count(8)
    expect(page.locator("#lm-dr-sentence")).to_contain_text("Liu et al. 2025")
    # the other curves are folded, and readable once opened
    expect(page.locator("#lm-more-curves figure").first).to_be_hidden()
    page.locator("#lm-more-curves > summary").click()
    expect(page.locator("#lm-more-curves figure").first).to_be_visible()
    expect_readable(page, "#lm-more-curves .curve-grid")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    page.locator("#lm-path-panel").screenshot(path=str(SCREENSHOTS / f"lm-length-{size}-box.png"), caret="initial")


def test_the_overlay_draws_the_three_paths_on_one_chart_per_metric(make_context):
    for size, (w, h) in SIZES.items():
        page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
        page.set_default_timeout(30_000)
        page.goto(PAGE)
        page.wait_for_selector("#lm-overlay-link")
        page.locator("#lm-overlay-link").click()
        page.wait_for_url("**overlay=all**")
        run = page.locator("#lm-path-start button")
        if run.count():  # no test before this one (in this worker, in this order) ran R1 and distillation:
            run.click()  # the box's Run, as a reader would (a link never starts work)
            page.wait_for_selector("#lm-path-start", state="detached")
        # the box polls until every path is drawn
        page.wait_for_function("() => document.querySelector('#lm-overlay-paths')"
                               " && !document.querySelector('#lm-overlay-paths progress')", timeout=3 * RUN_MS)
        wait_settled(page)
        failed = [c.text_content() for c in page.locator("#lm-overlay-paths li code").all()]
        assert not failed, f"a path's run failed: {failed}"
        for chart in page.locator("figure[data-chart^='lm-overlay-']").all():
            keys = [g.get_attribute("data-series") for g in chart.locator("g.series").all()]
            assert keys == ["r1-zero", "r1", "distillation"], chart.get_attribute("data-chart")
        assert page.evaluate(NO_SIDEWAYS_SCROLL)
        expect_readable(page, "#lm-path-panel .curve-grid")
        expect(page.locator('.path-choice a[aria-current="true"]')).to_have_text("All three")
        page.locator("#lm-path-panel").screenshot(path=str(SCREENSHOTS / f"lm-length-{size}-overlay.png"),
                                                  caret="initial")
