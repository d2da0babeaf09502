"""No rendered text under 11 px on any step page of any kind, at 390, 1280 and 1920 px (issue 32:
the tiny LM update step's 34 attention-map labels were 10 px, a record's token numbers 10.88 px).

Every non-blank text node that is rendered (checkVisibility: not display:none, not
visibility:hidden, not transparent; a client rect of at least 1x1 px) is measured by its element's
computed font-size. SVG text is measured as rendered: its computed font-size is in user units, so it
is multiplied by the scale of the element's getScreenCTM() (the viewBox fit, the graph's camera
and pan/zoom, any transform on the way), taken as sqrt(|det|) so that a rotated label (the
attention map's column labels turn -60°) counts by its size, not by its angle. HTML text is not
scaled by transforms anywhere on these pages, so its computed size is its rendered size.
"""
from __future__ import annotations

import pytest
from browser_helpers import upload_small_record, wait_settled

pytestmark = [pytest.mark.browser, pytest.mark.slower_tier]   # 16 pages at 3 sizes: ~2 min

SIZES = {"390x844": (390, 844), "1280x720": (1280, 720), "1920x1080": (1920, 1080)}
TOY_STEPS = ("policy", "advantages", "clip", "reference")
LM_STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
RECORD_STEPS = ("group", "ratio", "kl", "loss", "diagnostics")
MIN_PX = 11

SMALL_TEXT = """min => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    if (!t.textContent.trim()) continue;
    const el = t.parentElement;
    if (!el || el.closest('title, desc, script, style, noscript, template')) continue;
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    const range = document.createRange();
    range.selectNodeContents(t);
    if (!Array.from(range.getClientRects()).some(r => r.width >= 1 && r.height >= 1)) continue;
    let px = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGElement) {
      const m = el.getScreenCTM();
      if (m) px *= Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
    }
    if (px < min - 0.01) out.push({px: Math.round(px * 100) / 100, text: t.textContent.trim().slice(0, 24),
                                   cls: el.getAttribute('class'), tag: el.tagName});
  }
  return out;
}"""


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    """The repository's walkthroughs (toy_grpo and tiny_lm_grpo); a record is uploaded to it."""
    return repo_base_url


@pytest.fixture(scope="module")
def record_id(base_url) -> str:
    return upload_small_record(base_url)


@pytest.mark.parametrize("size", SIZES)
def test_no_text_under_11px_on_any_step_page(make_context, record_id, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    pages = ([f"/walkthroughs/toy_grpo/steps/{s}" for s in TOY_STEPS]
             + [f"/walkthroughs/tiny_lm_grpo/steps/{s}" for s in LM_STEPS]
             + [f"/walkthroughs/{record_id}/steps/{s}" for s in RECORD_STEPS])
    found = {}
    for path in pages:
        page.goto(path, timeout=60_000)    # a tiny LM step or a record is computed on its first visit
        wait_settled(page)
        small = page.evaluate(SMALL_TEXT, MIN_PX)
        if small:
            found[path] = (len(small), small[:4])
    assert not found, found
