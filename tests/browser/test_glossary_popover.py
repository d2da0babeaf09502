"""A glossary definition opens at its term (its invoker is its CSS anchor), not centred on the page:
for every term on a step of each walkthrough, at a phone, a laptop and a desktop size, the open
definition touches its term's line (within 12 px above or below it) and lies whole in the viewport."""
from __future__ import annotations

import pytest
from browser_helpers import wait_settled

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "laptop": (1280, 720), "desktop": (1920, 1080)}
PAGES = ("/walkthroughs/toy_grpo/steps/advantages", "/walkthroughs/tiny_lm_grpo/steps/ratio")


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    return repo_base_url


@pytest.mark.parametrize("size", SIZES)
def test_each_definition_opens_beside_its_term(make_context, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    far = []
    for url in PAGES:
        page.goto(url)
        wait_settled(page)
        page.locator("details:not([open]) > summary").evaluate_all("ss => ss.forEach(s => s.click())")  # folds
        terms = page.locator("button.term").all()
        assert terms, url
        for term in terms:
            term.scroll_into_view_if_needed()
            term.click()
            opened = page.locator("[popover]:popover-open")
            word, box = term.bounding_box(), opened.bounding_box()
            assert word is not None and box is not None
            gap = max(box["y"] - (word["y"] + word["height"]), word["y"] - (box["y"] + box["height"]))
            inside = box["x"] >= -1 and box["y"] >= -1 and box["x"] + box["width"] <= w + 1 \
                and box["y"] + box["height"] <= h + 1
            if not (-1 <= gap <= 12 and inside):
                far.append(f"{url} {term.inner_text()!r}: {gap:.0f} px from its term, inside={inside}")
            page.keyboard.press("Escape")
    assert not far, "\n".join(far)
