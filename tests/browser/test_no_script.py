"""Without JavaScript every control is a plain link or form that loads a full page."""
import re

import pytest
from browser_helpers import BY_ID, STEPS, node
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_links_and_forms_work_without_javascript(make_context, shot):
    page = make_context(java_script_enabled=False).new_page()
    page.goto("/")
    with page.expect_navigation():                      # the start page's link to step 1
        page.locator("a#start").click()
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["policy"].title)
    with page.expect_navigation():
        page.get_by_role("button", name="Next").click()
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["advantages"].title)
    for step in STEPS[2:]:
        with page.expect_navigation():                  # a full page load, not a swap
            page.get_by_role("button", name="Next").click()
        expect(page).to_have_url(re.compile(re.escape(step.path) + "$"))
        expect(page.locator("#step-export-title")).to_have_text(step.title)
        expect(page.locator(".step-count")).to_have_text(f"Step {step.index} of 4")
        # the server's fitted camera, untouched by any script (docs/design.md §2, "Graph layout")
        cam = page.locator("#camera")
        xyz = [cam.get_attribute(f"data-camera-{k}") for k in "xyz"]
        expect(cam).to_have_attribute("transform", f"translate({xyz[0]} {xyz[1]}) scale({xyz[2]})")
        expect(page.locator(".graph .node.selected")).to_have_attribute("data-node-id", step.selected)
        expect(page).to_have_title(re.compile("^" + re.escape(step.point)))   # the tab names the point (issue 49)
        # no script ran: nothing announced, no Panzoom styles
        expect(page.locator("#announcer")).to_have_text("")
        expect(page.locator(".pan-target")).not_to_have_attribute("style", re.compile("."))
    shot(page, "reference")

    with page.expect_navigation():
        page.get_by_role("button", name="Previous").click()
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["clip"].title)

    # a node's label is a link that selects it
    label = node(page, "python@clipped#0").locator("a.node-link")
    with page.expect_navigation():
        label.click()
    expect(page).to_have_url(re.compile(r"/steps/clip\?node=python%40clipped%230$"))
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "python@clipped#0")
    expect(node(page, "python@clipped#0")).to_have_class(re.compile(r"\bselected\b"))

    # a module's toggle is a link that collapses it
    with page.expect_navigation():
        node(page, "clipped").locator("a.toggle-link").click()
    expect(node(page, "python@clipped#0")).to_have_count(0)
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "clipped")

    # the parameter form is a GET form (its <details> is open on the clip step, no script needed)
    page.locator("#p-seed").fill("4")
    with page.expect_navigation():
        page.get_by_role("button", name="Recompute").click()
    expect(page).to_have_url(re.compile(r"[?&]seed=4(&|$)"))
    expect(page.locator("#p-seed")).to_have_value("4")
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["clip"].title)
    shot(page, "seed-4")
