"""A second, view-only snapshot whose texts carry markup: shown as text, never run."""
import re

import pytest
from browser_helpers import expect_framed, fitted_transform, wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_other_snapshot_escapes_its_texts_and_tours(page, shot):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto("/walkthroughs/other/steps/first")
    expect(page.locator(".step-note")).to_have_text("Note with <script>alert('x')</script> & more")
    expect(page.locator("#step-title")).to_have_text("First <i>look</i>")
    expect(page.locator("#step-title i")).to_have_count(0)
    expect(page.locator(".walkthrough-title")).to_have_text("Another <em>walkthrough</em>")
    expect(page.locator(".step-count")).to_have_text("Step 1 of 2")
    expect(page.locator(".graph .node.selected")).to_have_attribute("data-node-id", "src")
    wait_settled(page)
    expect(page.locator("#camera")).to_have_attribute("transform", fitted_transform(page))
    expect_framed(page, ["src"])
    expect(page.get_by_role("region", name="Inspector")).to_contain_text("view-only")
    expect(page.locator("#group-table")).to_have_count(0)
    shot(page, "first")

    page.get_by_role("button", name="Next").click()
    expect(page).to_have_url(re.compile(r"/walkthroughs/other/steps/second$"))
    expect(page.locator("#step-title")).to_have_text("Second")
    expect(page.locator("#announcer")).to_have_text("Step 2 of 2: Second")
    expect(page.locator('.graph [data-node-id="block<b>.fc"]')).to_have_class(re.compile(r"\bselected\b"))
    wait_settled(page)
    expect(page.locator("#camera")).to_have_attribute("transform", fitted_transform(page))
    expect_framed(page, ["block<b>.fc", "block<b>"])
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "block<b>.fc")
    page.wait_for_function("() => !document.querySelector('#camera[data-moving]')")
    shot(page, "second")
    # a node id with markup in it survives a round trip through the URL and a swap:
    # Enter on the module selects it, its ± closes it, and focus stays on what was used
    page.locator('.graph [data-node-id="block<b>"]').focus()
    page.keyboard.press("Enter")
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "block<b>")
    expect(page.locator('.graph [data-node-id="block<b>.fc"]')).to_have_count(1)
    expect(page.locator('.graph [data-node-id="block<b>"]')).to_be_focused()
    page.locator('.graph [data-node-id="block<b>"] .toggle-link').focus()
    page.keyboard.press("Enter")
    expect(page.locator('.graph [data-node-id="block<b>.fc"]')).to_have_count(0)
    expect(page.locator('.graph [data-node-id="block<b>"] .toggle-link')).to_be_focused()
    assert dialogs == []
