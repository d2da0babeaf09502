"""Compare mode in the browser: enter it from a step, read A and B side by side, see the graph's
gradient-change marker and the node's number in the Inspector, open each one-click case, all of
it without JavaScript too, and no sideways scrolling on a phone."""
import re

import pytest
from browser_helpers import BY_ID, STEPS, node, pan_into_view, wait_settled
from playwright.sync_api import expect

from app.kinds.toy.views.compare_cases import CASES

pytestmark = pytest.mark.browser

COMPARE = "/api/walkthroughs/toy_grpo/compare"
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"


def test_enter_compare_mode_read_both_sides_and_a_node(page, shot):
    page.goto(BY_ID["clip"].path)
    wait_settled(page)
    expect(page.locator("#compare-toggle")).to_have_attribute("aria-pressed", "false")
    page.locator("#compare-toggle").click()                  # an htmx swap, the URL pushed
    expect(page).to_have_url(re.compile(r"/steps/clip\?vs_preset=trl$"))
    wait_settled(page)
    expect(page.locator("#compare-toggle")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#compare-banner")).to_contain_text("A = deepseekmath, B = trl")

    panel = page.locator("#compare")
    expect(panel.locator("#side-a-words")).to_contain_text("A is the step as this page sets it")
    expect(panel.locator("#side-b-words")).to_contain_text("TRL 1.16 defaults")
    rows = panel.locator("#compare-samples tbody tr")
    expect(rows).to_have_count(8)
    for side in ("side-a", "side-b"):                         # both columns laid out, not hidden
        cell = rows.first.locator(f"td.{side}").first
        expect(cell).to_be_visible()
    api = page.request.get(COMPARE, params={"vs_preset": "trl"}).json()
    first_b = float(rows.first.locator("td.side-b .num").first.get_attribute("data-value"))
    assert first_b == api["b"]["samples"][0]["advantage"]

    # the marker on the graph: a tag and a bar sized by the change
    mark = node(page, "ratio").locator(".grad-mark")
    expect(mark.locator(".grad-tag")).to_have_text("∇ 6.5%")
    fraction = float(mark.get_attribute("data-fraction"))
    assert fraction == pytest.approx(api["grad_change"]["ratio"]["relative"], abs=1e-6)
    track, fill = mark.locator(".grad-track").bounding_box(), mark.locator(".grad-fill").bounding_box()
    assert fill["width"] == pytest.approx(track["width"] * fraction, abs=1.0)
    expect(node(page, "divergence").locator(".grad-tag")).to_have_text("∇ 100%")   # TRL: β = 0

    # the number in the Inspector after clicking a node; compare mode stays on
    target = node(page, "ratio")
    pan_into_view(page, target)
    target.locator(".label").click()
    expect(page).to_have_url(re.compile(r"[?&]node=ratio(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]vs_preset=trl(&|$)"))
    box = page.locator("#inspector #compare-node")
    expect(box.locator("[data-grad-tag]")).to_have_text("∇ 6.5%")
    relative = float(box.locator("[data-relative]").get_attribute("data-relative"))
    assert relative == api["grad_change"]["ratio"]["relative"]
    wait_settled(page)
    shot(page, "ratio")

    # Next keeps compare mode; leaving it drops every vs_ parameter
    page.locator("#next-step").click()
    expect(page).to_have_url(re.compile(r"/steps/reference\?node=ratio&vs_preset=trl$|/steps/reference\?vs_preset=trl$"))
    wait_settled(page)
    page.locator("#compare-leave").click()
    expect(page).to_have_url(re.compile(r"/steps/reference(\?node=ratio)?$"))
    expect(page.locator(".grad-mark")).to_have_count(0)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_case_opens_with_its_explanation(page, case):
    page.goto(BY_ID["advantages"].path)
    wait_settled(page)
    link = page.locator(f'.compare-cases li[data-case="{case.id}"] a')
    link.click()
    explain = page.locator(".case-explain")
    expect(explain).to_have_attribute("data-case", case.id)
    expect(explain).to_contain_text(case.sentence)
    expect(page.locator(f'.compare-cases li[data-case="{case.id}"] a')).to_have_attribute("aria-current", "true")
    expect(page.locator("#compare-banner")).to_contain_text(case.title)
    expect(page.locator("#compare-samples tbody tr")).to_have_count(8)
    wait_settled(page)


def test_compare_works_without_javascript(make_context, shot, problems):
    problems.allowed.append("status of 422")  # the refused vs_beta below is answered with a 422
    page = make_context(java_script_enabled=False).new_page()
    page.goto(BY_ID["clip"].path)
    with page.expect_navigation():                           # a full page load, not a swap
        page.locator("#compare-toggle").click()
    expect(page).to_have_url(re.compile(r"/steps/clip\?vs_preset=trl$"))
    expect(page.locator("#compare-samples tbody tr")).to_have_count(8)
    expect(node(page, "ratio").locator(".grad-tag")).to_have_text("∇ 6.5%")

    # the GET form: A stays the paper, B becomes verl with its own β
    page.locator("#c-vs_preset").select_option("verl")
    page.locator("#c-vs_beta").fill("0.5")
    with page.expect_navigation():
        page.locator("#compare-submit").click()
    expect(page).to_have_url(re.compile(r"vs_preset=verl&vs_beta=0\.5$"))
    expect(page.locator("#side-b-words")).to_contain_text("preset verl")

    # a refused value is named next to its field
    page.locator("#c-vs_beta").fill("11")
    with page.expect_navigation():
        page.locator("#compare-submit").click()
    expect(page.locator("#e-vs_beta")).to_contain_text("0 <= beta <= 10")

    # a case is a plain link; a node's label selects it and compare mode stays
    with page.expect_navigation():
        page.locator('.compare-cases li[data-case="kl-times-ratio"] a').click()
    expect(page.locator(".case-explain")).to_have_attribute("data-case", "kl-times-ratio")
    with page.expect_navigation():
        node(page, "ratio").locator("a.node-link").click()
    expect(page).to_have_url(re.compile(r"node=ratio&vs_preset=deepseekmath&vs_kl_bias_correction=true$"))
    expect(page.locator("#compare-node [data-grad-tag]")).to_have_text("∇ 3.2%")
    shot(page, "no-js")


def test_no_sideways_scroll_on_a_phone(make_context, shot):
    page = make_context(viewport={"width": 390, "height": 844}).new_page()
    for step in STEPS:
        page.goto(step.path + "?vs_preset=trl")
        wait_settled(page)
        assert page.evaluate(NO_SIDEWAYS_SCROLL), step.id
        expect(page.locator("#compare-samples tbody tr")).to_have_count(8)
    size = page.evaluate("""() => parseFloat(getComputedStyle(
        document.querySelector('.grad-tag')).fontSize) * document.querySelector('.grad-tag').getScreenCTM().a""")
    assert size >= 9, size                                    # the tag stays readable on a phone
    shot(page, "phone")
