"""A second look at the toy walkthrough in the browser (issue 49, items 2 to 4), at 390x844, 1280x720
and 1920x1080, one page per size reused across the module:

(a) every step's figures: no two texts of one figure overlap (touching is fine, more than 0.5 px is
    not), and each figure fills its room: at least 60 % of the figure panel's width, or its designed
    maximum, where its 11-unit text reaches the page's 16 px body size (larger would not help);
(b) a training path's view says in the first view what it shows (the path's last update, step N of M),
    whether the step's point still shows in it and why not, and offers the way back to the step's own
    figure;
(c) the graph's input node carries no alarm for the export's palette-default shape; the inspector says
    it as information.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_fixtures import CSP_LISTENER, Problems
from browser_helpers import BY_ID, STEPS, node, wait_settled
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SIZES = {"390x844": (390, 844), "1280x720": (1280, 720), "1920x1080": (1920, 1080)}
CHART_TEXT_PX = 11.0    # a chart's text size in its own units (static/css/charts.css .chart-svg)
TEXT_MAX_PX = 16.0      # the page's body text: a chart's text scaled past it would not read better
MIN_SHARE = 0.6         # a figure takes at least this share of its panel's width ...
OVERLAP_PX = 0.5        # ... and two texts may touch, never overlap by more than this
WARN, WARN_BG = "rgb(138, 75, 0)", "rgb(255, 244, 224)"  # app.css --warn, --warn-bg

# Every figure (outermost svg) of the step's figure panel: its drawn width, its viewBox width, the
# panel's content width and every pair of its texts whose boxes overlap.
FIGURES = """(overlapPx) => {
  const panel = document.querySelector('#story-figure');
  const body = document.querySelector('#story-figure-body') || panel;
  const style = getComputedStyle(body);
  const room = body.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return Array.from(panel.querySelectorAll('svg')).filter(s => !s.parentElement.closest('svg')).map(svg => {
    const texts = Array.from(svg.querySelectorAll('text')).map(t => [t.textContent.trim(), t.getBoundingClientRect()])
      .filter(([s, r]) => s && r.width > 0 && r.height > 0);
    const overlaps = [];
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i][1], b = texts[j][1];
      const dx = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const dy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (dx > overlapPx && dy > overlapPx) overlaps.push([texts[i][0], texts[j][0], +dx.toFixed(1), +dy.toFixed(1)]);
    }
    return {label: svg.getAttribute('aria-label') || svg.getAttribute('class'),
            width: svg.getBoundingClientRect().width, units: svg.viewBox.baseVal.width, room, overlaps};
  });
}"""


@pytest.fixture(scope="module")
def pages(browser, base_url) -> Iterator[tuple[dict[str, Page], Problems]]:
    """One page per size for the whole module, watched for console errors and CSP violations."""
    problems = Problems()
    contexts = []
    opened: dict[str, Page] = {}
    for name, (w, h) in SIZES.items():
        ctx = browser.new_context(base_url=base_url, viewport={"width": w, "height": h})
        ctx.set_default_timeout(20_000)
        ctx.add_init_script(CSP_LISTENER)
        ctx.on("page", problems.watch)
        contexts.append(ctx)
        opened[name] = ctx.new_page()
    yield opened, problems
    for ctx in contexts:
        ctx.close()


@pytest.fixture(params=list(SIZES))
def page(request, pages) -> Iterator[Page]:
    opened, problems = pages
    problems.items.clear()
    yield opened[request.param]
    assert not problems.items, "problems on the pages:\n" + "\n".join(problems.items)


def open_page(page: Page, path: str) -> None:
    page.goto(path)
    wait_settled(page)


def test_every_figure_fills_its_room_and_no_text_overlaps(page):
    for step in STEPS:
        open_page(page, step.path)
        figures = page.evaluate(FIGURES, OVERLAP_PX)
        assert figures, step.id
        for f in figures:
            assert not f["overlaps"], (step.id, f["label"], f["overlaps"])
            cap = f["units"] * TEXT_MAX_PX / CHART_TEXT_PX   # its text at the page's 16 px
            assert f["width"] <= cap + 1, (step.id, f)
            assert f["width"] >= min(MIN_SHARE * f["room"], cap) - 1, (step.id, f)


def test_a_paths_view_says_what_it_shows_and_the_way_back(page):
    step = BY_ID["reference"]
    open_page(page, step.path + "?process=r1-zero")
    assert page.evaluate("() => window.scrollY") == 0
    banner = page.locator("#path-view")
    expect(banner).to_contain_text(re.compile(r"DeepSeek-R1-Zero.s last update, training step (\d+) of \1"))
    title, back = banner.locator(".path-view-title"), banner.locator("#path-view-back")
    expect(title).to_be_in_viewport(ratio=1)
    expect(back).to_be_in_viewport(ratio=1)
    for f in page.evaluate(FIGURES, OVERLAP_PX):                 # the path's figure is as legible as the step's
        assert not f["overlaps"], (f["label"], f["overlaps"])
    # the step's point shows in the path's update (a clipped row moved by its KL part), or the view says
    # why it cannot
    if page.locator("#story-figure .parts-row.is-clipped").count() == 0:
        expect(banner.locator(".path-view-point")).to_contain_text("cannot show here")
    back.click()
    expect(page).to_have_url(re.compile(re.escape(step.path) + "$"))
    wait_settled(page)
    expect(page.locator("#path-view")).to_have_count(0)
    expect(page.locator("#story-figure .parts-row.is-clipped").first).to_be_visible()   # the step's own group


def test_the_input_nodes_shape_note_is_information_not_an_alarm(page):
    open_page(page, BY_ID["policy"].path + "?node=input")
    box = node(page, "input")
    expect(box).to_have_count(1)
    expect(box).not_to_have_class(re.compile(r"\bwarning\b"))
    expect(box.locator(".warning-text")).to_have_count(0)
    assert "⚠" not in box.text_content()
    inspector = page.locator("#inspector")
    expect(inspector.locator("[data-node-title]")).to_have_attribute("data-node-title", "input")
    note = inspector.locator(".shape-note")
    expect(note).to_have_text("The file's palette entry declares a default shape 1,3,224,224; "
                              "the traced input is 1,3.")
    expect(inspector.locator(".warning")).to_have_count(0)
    # neutral: neither the warning's colour nor its tinted box
    look = note.evaluate("e => { const s = getComputedStyle(e); return [s.color, s.backgroundColor, s.borderLeftStyle]; }")
    assert look[0] != WARN and look[1] != WARN_BG and look[2] == "none", look
