"""axe-core on every kind of page, accessible names, visible keyboard focus, clean consoles."""
import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from browser_helpers import BLOCKING, STEPS, axe_blocking, describe, wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PAGES = ["/"] + [step.path for step in STEPS] + [
    "/walkthroughs/toy_grpo/steps/policy?node=policy.log_probabilities",   # probability bars
    "/walkthroughs/toy_grpo/steps/clip?node=python%40clipped%230",         # clip plot, group table
    "/walkthroughs/toy_grpo/steps/policy?node=input",                      # shape warning
    "/walkthroughs/toy_grpo/steps/clip?clip_epsilon=2",                    # form error (422)
    "/walkthroughs/toy_grpo/steps/clip?process=r1",                        # a path: fields marked unused
    "/walkthroughs/other/steps/second",                                    # view-only snapshot
    "/no/such/page",                                                       # 404 page
]
INTERACTIVE = "a[href], button, input:not([type=hidden]), select, textarea, [role=button], [tabindex='0']"


@pytest.fixture(scope="module")
def axe() -> Axe:
    return Axe()




def test_axe_finds_no_serious_violations(page, axe, problems):
    problems.allowed += ["status of 422", "status of 404"]   # the two error pages' own status
    found = {}
    for url in PAGES:
        page.goto(url)
        wait_settled(page)
        violations = axe.run(page).response["violations"]
        found[url] = violations
        print(f"axe {url}: " + (describe(violations) or "no violations"))
    blocking = {url: [v for v in vs if v["impact"] in BLOCKING] for url, vs in found.items()}
    assert not any(blocking.values()), "\n\n".join(f"{url}\n{describe(vs)}" for url, vs in blocking.items() if vs)


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 720)])
def test_axe_on_every_step_and_the_overview_at_phone_and_laptop_sizes(make_context, axe, width, height):
    page = make_context(viewport={"width": width, "height": height}).new_page()
    urls = [step.path for step in STEPS] + [STEPS[2].path + "?view=overview", STEPS[2].path + "?process=r1"]
    blocking = axe_blocking(page, axe, urls, wait_settled)
    assert not blocking, "\n\n".join(f"{url}\n{describe(vs)}" for url, vs in blocking.items())


def test_every_control_has_an_accessible_name(page):
    for url in (STEPS[2].path, "/walkthroughs/toy_grpo/steps/policy?node=policy.log_probabilities",
                "/walkthroughs/other/steps/second"):
        page.goto(url)
        wait_settled(page)
        # folded controls (the form's "More conventions") are named too: unfold them to check
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        controls = page.locator(INTERACTIVE)
        count = controls.count()
        assert count > 20, url
        for i in range(count):
            # a control not rendered at this size (the phone's column toggle on a laptop) is not exposed
            if controls.nth(i).evaluate("e => e.getClientRects().length === 0"):
                continue
            expect(controls.nth(i)).to_have_accessible_name(re.compile(r"\S"))
        # the graph's nodes say what they are; the step navigation is labelled
        expect(page.get_by_role("group", name=re.compile(r"^Model graph of "))).to_have_count(1)
        expect(page.get_by_role("navigation", name="Walkthrough steps")).to_have_count(1)
        expect(page.get_by_role("toolbar", name="Graph view")).to_have_count(1)


FOCUS_STYLE = """el => {
  const s = getComputedStyle(el);
  const box = el.querySelector(':scope > .box, :scope > .container-box');
  return {
    tag: el.tagName, id: el.id || el.getAttribute('data-node-id') || el.textContent.trim().slice(0, 30),
    outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
    stroke: box ? parseFloat(getComputedStyle(box).strokeWidth) >= 4 : false,
    visible: el.matches(':focus-visible'),
  };
}"""


def test_keyboard_focus_is_always_visible(page):
    page.goto(STEPS[2].path)
    wait_settled(page)
    page.locator("body").focus()
    seen, kinds = [], set()
    for _ in range(60):
        page.keyboard.press("Tab")
        focused = page.locator(":focus")
        if focused.count() == 0:
            break
        style = focused.evaluate(FOCUS_STYLE)
        seen.append(style)
        kinds.add(style["tag"])
        assert style["visible"] and (style["outline"] or style["stroke"]), style
    # the tab order reached the skip link, links, buttons, graph nodes and the form
    assert {"A", "BUTTON", "g", "INPUT"} <= kinds, kinds
    nodes = [s for s in seen if s["tag"] == "g"]
    assert len(nodes) >= 8 and all(s["outline"] and s["stroke"] for s in nodes), nodes
    # the skip link comes first and moves focus to the step panel, whose Next follows at once
    page.goto(STEPS[2].path)
    wait_settled(page)
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to the step")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#step-panel")).to_be_focused()
    # then the terms of the headline (each opens its definition), the fold of its second sentence, then Previous
    terms = page.locator("#step-point button.term:visible").count()
    assert terms >= 3
    for _ in range(terms):
        page.keyboard.press("Tab")
        expect(page.locator(":focus")).to_have_class("term")
    if page.locator("#step-point details > summary").count():
        page.keyboard.press("Tab")
        expect(page.locator("#step-point details > summary")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#prev-step")).to_be_focused()
