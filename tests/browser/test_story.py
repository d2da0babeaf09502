"""The story (issue 20; docs/design.md, "The story"): on every step of both walkthroughs, at a
phone, a laptop and a desktop size, the step's focus figure (data-step-focus) is in the first
view next to or under the step's point; the form is folded behind "Change the numbers" (open on
the clip step); the start page starts at step 1; glossary terms open by keyboard; the last step
leads on; marks agree with the story (no ✂ before the clip step).

Issue 32: each step's headline is its point (the export's title and note are labelled as the
author's, below); on a phone the figure fills 60 % of the first view (or is whole in it), and no
figure scrolls sideways at any size; the start page offers "Start: <step 1's point>"."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser_helpers import FOCUS_BOX, expect_figure_fits, expect_headline, fills_first_view, wait_settled
from playwright.sync_api import expect

from app.kinds.tiny_lm.views.story import STORIES as TINY_LM_STORIES
from app.kinds.toy.views.story import STORIES as TOY_STORIES

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots" / "story"
SIZES = {"phone": (390, 844), "laptop": (1280, 720), "desktop": (1920, 1080)}
WALKS = {
    "toy_grpo": ("policy", "advantages", "clip", "reference"),
    "tiny_lm_grpo": ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update"),
}
STORIES = {"toy_grpo": TOY_STORIES, "tiny_lm_grpo": TINY_LM_STORIES}


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    """The repository's walkthroughs folder (toy_grpo and tiny_lm_grpo), for this module."""
    return repo_base_url




@pytest.mark.parametrize("size", SIZES)
def test_every_step_opens_on_its_point_and_its_figure(make_context, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    seen = {}
    for walk, steps in WALKS.items():
        for n, step in enumerate(steps, 1):
            page.goto(f"/walkthroughs/{walk}/steps/{step}")
            wait_settled(page)
            # the headline is the sentence the step teaches; the export's own title is labelled, below
            expect_headline(page, STORIES[walk][step].point)
            expect(page.locator(".step-export-title")).to_contain_text("The export’s title: ")
            box = page.evaluate(FOCUS_BOX)
            assert box is not None, f"{walk}/{step}: no data-step-focus or no step point"
            assert fills_first_view(box), f"{walk}/{step} at {size}: {box}"
            expect_figure_fits(box, f"{walk}/{step} at {size}")
            # next to the point (wide: the figure's column starts right of it) or under it (narrow)
            assert box["top"] >= box["pointBottom"] - 1 or box["left"] >= box["pointRight"] - 1, box
            assert not box["sideways"], f"{walk}/{step} at {size}: the page scrolls sideways"
            # the form is one click away, open only on a step about a parameter (the ratio/clip step)
            fold = page.locator("details#change-numbers")
            expect(fold).to_have_count(1)
            assert fold.evaluate("d => d.open") == (step in ("clip", "ratio")), f"{walk}/{step}"
            expect(fold.locator("> summary")).to_contain_text("Change the numbers")
            seen[(walk, step)] = box["name"]
            page.screenshot(path=str(SHOTS / f"{walk}-{n}-{step}-{size}.png"))
    # one figure per step, each named for what it shows
    assert len(set(seen.values())) == len(seen), seen


def test_the_start_page_begins_the_story(page):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/")
    wait_settled(page)
    start = page.locator("a#start")
    expect(start).to_be_in_viewport()
    expect(start).to_have_text("Start: " + TOY_STORIES["policy"].point)     # step 1's point, not the export's title
    intro = page.locator(".home-intro")
    expect(intro).to_contain_text("no second network")
    start.click()
    page.wait_for_url("**/walkthroughs/toy_grpo/steps/policy")
    expect(page.locator(".step-count")).to_have_text("Step 1 of 4")


def test_a_term_opens_its_definition_by_keyboard(page):
    page.goto("/walkthroughs/toy_grpo/steps/advantages")
    wait_settled(page)
    term = page.locator("#step-point button.term", has_text="advantage").first
    definition = page.locator(f'#{term.get_attribute("popovertarget")}')
    expect(definition).to_be_hidden()
    term.focus()
    page.keyboard.press("Enter")
    expect(definition).to_be_visible()
    expect(definition).to_contain_text("A = (r − mean) / std")
    page.keyboard.press("Escape")
    expect(definition).to_be_hidden()


def test_marks_follow_the_story_on_the_toy(page):
    """No ✂ before the clip step; ratio and KL columns only once introduced."""
    expected = {"policy": set(), "advantages": {"reward", "advantage"},
                "clip": {"reward", "advantage", "ratio", "clipped", "ratio_grad", "clip"},
                "reference": {"reward", "advantage", "ratio", "clipped", "ratio_grad", "clip", "divergence",
                              "objective"}}
    for step, columns in expected.items():
        page.goto(f"/walkthroughs/toy_grpo/steps/{step}")
        wait_settled(page)
        figure = page.locator("[data-step-focus]")
        shown = set(figure.locator("#group-table th[data-column]").evaluate_all(
            "els => els.map(e => e.dataset.column)"))
        assert shown == columns, step
        clips = figure.locator(".clip-mark").count() + figure.locator(".clip-label").count()
        assert (clips > 0) == (step in ("clip", "reference")), step


def test_the_last_step_leads_on(page):
    page.goto("/walkthroughs/toy_grpo/steps/reference")
    wait_settled(page)
    nxt = page.locator("a#next-step")
    expect(nxt).to_contain_text("Next:")
    nxt.click()
    page.wait_for_url("**/walkthroughs/tiny_lm_grpo/steps/sample")


def test_the_figure_links_its_table_and_its_chart(page):
    """In the advantages step's figure, a row and its bar mark each other (static/js/linked.js,
    scoped to the figure), and nothing in the inspector lights with them."""
    page.goto("/walkthroughs/toy_grpo/steps/advantages")
    wait_settled(page)
    figure = page.locator("#story-figure")
    figure.locator('#group-table tr[data-sample="3"]').hover()
    expect(figure.locator('g.adv-bar[data-sample="3"]')).to_have_class(re.compile(r"\bis-linked\b"))
    expect(page.locator("#inspector .is-linked")).to_have_count(0)
    figure.locator('.chart-advantages rect.hit[data-samples="5"]').hover()
    expect(figure.locator('#group-table tr[data-sample="5"]')).to_have_class(re.compile(r"\bis-linked\b"))
