"""The token view by keyboard and by what its marks say (issue 20), in Chromium at a phone's and a
laptop's size: one Tab stop per completion (roving tabindex), arrow keys, Home and End inside,
hover and focus cards never both showing, no ✂ before the ratio step, and a clipped token that the
KL term still moves says so."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from test_tiny_lm_page import BASE, SIZES, base_url, load_tokens_js, on_step  # noqa: F401  (base_url: the server)

from app.views.numbers import readout

pytestmark = pytest.mark.browser

STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
VISIBLE_CARDS = """() => [...document.querySelectorAll('#token-panel .tok-card')]
  .filter(c => getComputedStyle(c).display !== 'none')
  .map(c => { const r = c.getBoundingClientRect();
              return {label: c.parentElement.getAttribute('aria-label'), left: r.left, top: r.top,
                      right: r.right, bottom: r.bottom}; })"""
ACTIVE = """() => { const a = document.activeElement; const li = a.closest('.completion');
  return {inPanel: !!a.closest('#token-panel'), tok: a.classList.contains('tok'),
          completion: li ? Number(li.dataset.completion) : null,
          position: a.classList.contains('tok') ? [...a.parentElement.children].indexOf(a) : null}; }"""


def open_step(page, step: str) -> None:
    page.goto(f"{BASE}/steps/{step}")
    on_step(page, step)
    load_tokens_js(page)


def group_size(page) -> int:
    return page.locator("#token-panel .completion").count()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("step", ("sample", "ratio", "update"))
def test_tab_crosses_the_token_view_in_at_most_g_plus_4_stops(make_context, size, step):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    open_step(page, step)
    g = group_size(page)
    page.locator("#token-panel").focus()
    stops, completions = 0, set()
    for _ in range(200):
        page.keyboard.press("Tab")
        where = page.evaluate(ACTIVE)
        if not where["inPanel"]:
            break
        stops += 1
        if where["tok"]:
            completions.add(where["completion"])
    else:
        pytest.fail("Tab never left the token panel")
    assert stops <= g + 4, (step, size, stops, g)
    assert completions == set(range(g)), "every completion is one Tab stop"
    # exactly one token per completion is in the Tab order
    assert page.locator('#token-panel .tok[tabindex="0"]').count() == g


@pytest.mark.parametrize("size", SIZES)
def test_arrow_keys_home_and_end_move_the_focus(make_context, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    open_step(page, "ratio")
    rows = page.locator("#token-panel .completion .tokens")
    lengths = [rows.nth(i).locator(".tok").count() for i in range(rows.count())]
    first = rows.nth(0).locator(".tok").first
    first.focus()
    page.keyboard.press("ArrowRight")
    assert page.evaluate(ACTIVE) | {"inPanel": True} == {"inPanel": True, "tok": True, "completion": 0, "position": 1}
    expect(rows.nth(0).locator(".tok").nth(1)).to_have_attribute("tabindex", "0")
    expect(first).to_have_attribute("tabindex", "-1")
    expect(rows.nth(0).locator(".tok").nth(1).locator(".tok-card")).to_be_visible()
    page.keyboard.press("End")
    assert page.evaluate(ACTIVE)["position"] == lengths[0] - 1
    page.keyboard.press("ArrowRight")  # stays on the last
    assert page.evaluate(ACTIVE)["position"] == lengths[0] - 1
    page.keyboard.press("Home")
    assert page.evaluate(ACTIVE)["position"] == 0
    page.keyboard.press("ArrowLeft")  # stays on the first
    assert page.evaluate(ACTIVE)["position"] == 0
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(ACTIVE)["completion"] == 1 and page.evaluate(ACTIVE)["position"] == min(5, lengths[1] - 1)
    # down into a shorter completion lands on its last token
    short = min(range(1, len(lengths)), key=lambda i: lengths[i])
    for _ in range(short - 1):
        page.keyboard.press("ArrowDown")
    assert page.evaluate(ACTIVE) == {"inPanel": True, "tok": True, "completion": short,
                                     "position": min(5, lengths[short] - 1)}
    page.keyboard.press("ArrowUp")
    assert page.evaluate(ACTIVE)["completion"] == short - 1
    # the page does not scroll on arrow keys while a token has focus, and Tab goes on to the next
    # completion's current token, not to the next token
    page.keyboard.press("Tab")
    assert page.evaluate(ACTIVE)["completion"] == short and page.evaluate(ACTIVE)["tok"]
    # the current token survives leaving the completion: Shift+Tab comes back to it
    page.keyboard.press("Shift+Tab")
    assert page.evaluate(ACTIVE)["completion"] == short - 1
    # the aria-label still says every number so far
    label = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
    assert re.search(r"ρ \d", label) and "log π_old" in label and "clip" in label


@pytest.mark.parametrize("size", SIZES)
def test_hover_and_focus_cards_never_both_show(make_context, size):
    """Keyboard focus wins over a hover elsewhere; a token focused by the pointer gives way to the
    token the pointer is on. Never two cards at once."""
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    open_step(page, "update")
    rows = page.locator("#token-panel .completion .tokens")
    page.locator("#token-panel").focus()
    page.keyboard.press("Tab")
    while not page.evaluate(ACTIVE)["tok"]:  # past the metric tabs, to completion 0's token
        page.keyboard.press("Tab")
    page.keyboard.press("ArrowRight")
    keyed = rows.nth(0).locator(".tok").nth(1)
    expect(keyed).to_be_focused()
    assert [c["label"] for c in page.evaluate(VISIBLE_CARDS)] == [keyed.get_attribute("aria-label")]
    other = rows.nth(1).locator(".tok").nth(2)
    other.hover()  # the card of the focused token hangs over completion 1: the hover reaches under it
    assert [c["label"] for c in page.evaluate(VISIBLE_CARDS)] == [keyed.get_attribute("aria-label")]
    expect(keyed).to_be_focused()

    # by pointer: click one token, then point at another
    clicked = rows.nth(2).locator(".tok").first
    clicked.click()
    expect(clicked).to_be_focused()
    assert [c["label"] for c in page.evaluate(VISIBLE_CARDS)] == [clicked.get_attribute("aria-label")]
    pointed = rows.nth(3).locator(".tok").nth(3)
    pointed.hover()
    assert [c["label"] for c in page.evaluate(VISIBLE_CARDS)] == [pointed.get_attribute("aria-label")]
    page.mouse.move(1, 1)  # pointer off every token: the clicked token's card is back
    assert [c["label"] for c in page.evaluate(VISIBLE_CARDS)] == [clicked.get_attribute("aria-label")]


@pytest.mark.parametrize("step", STEPS)
def test_no_clip_mark_before_the_ratio_step_and_cards_show_only_what_was_introduced(make_context, step):
    page = make_context(viewport={"width": 1280, "height": 720}, reduced_motion="reduce").new_page()
    open_step(page, step)
    i = STEPS.index(step)
    labels = page.locator("#token-panel .tok").evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
    marks = page.locator("#token-panel .clip-mark").count()
    if i < STEPS.index("ratio"):
        assert marks == 0 and page.locator("#token-panel .tok.is-clipped").count() == 0
        assert not any("ρ " in s or "clip" in s for s in labels)
    else:
        assert marks > 0, "the default group has binding clips"
        assert marks == sum("clip binds" in s for s in labels)
    if i < STEPS.index("kl"):
        assert not any("KL" in s for s in labels)
    if i < STEPS.index("update"):
        assert not any("Δ log π" in s for s in labels)


def test_a_clipped_token_that_the_kl_term_moves_says_so(make_context):
    page = make_context(viewport={"width": 1280, "height": 720}, reduced_motion="reduce").new_page()
    api = page.request.get("/api/walkthroughs/tiny_lm_grpo/step?step=aggregation").json()
    open_step(page, "aggregation")
    tokens = [t for c in api["completions"] for t in c["tokens"]]
    cells = page.locator("#token-panel .tok")
    assert cells.count() == len(tokens)
    pulled = 0
    for k, t in enumerate(tokens):
        if not t["clip_active"]:
            continue
        # the surrogate gives a clipped token nothing, so its whole gradient is the KL term's
        label = cells.nth(k).get_attribute("aria-label")
        said = f"clip binds ✂: no push from the surrogate; the KL term still pulls: {readout(t['grad'])}"
        assert said in label, label
        pulled += 1
    assert pulled > 0
    clipped = page.locator("#token-panel .tok.has-kl-pull").first
    clipped.focus()
    expect(clipped.locator(".tok-card")).to_contain_text("the KL term still pulls")
    expect(page.locator(".kl-pull-note")).to_contain_text(f"{pulled} clipped tokens (✂KL) still get a gradient")


def test_ratios_print_enough_digits_to_tell_them_from_the_bound(make_context):
    page = make_context(viewport={"width": 1280, "height": 720}, reduced_motion="reduce").new_page()
    api = page.request.get("/api/walkthroughs/tiny_lm_grpo/step?step=ratio").json()
    open_step(page, "ratio")
    tokens = [t for c in api["completions"] for t in c["tokens"]]
    nums = page.locator("#token-panel .tok .tok-num").all_inner_texts()
    over = [(t["ratio"], n) for t, n in zip(tokens, nums, strict=True) if t["clip_active"] and t["ratio"] > 1]
    assert over, "the default group has a ratio clipped above 1 + ε"
    for ratio, shown in over:
        assert float(shown.replace("−", "-").rstrip("✂")) > 1.2, (ratio, shown)


@pytest.mark.parametrize("size", SIZES)
def test_axe_finds_nothing_serious_in_the_token_view(make_context, size):
    """axe-core on the token panel of every step, with a card open by keyboard."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    blocking = {}
    for step in STEPS:
        open_step(page, step)
        page.locator("#token-panel .tok").nth(1).focus()
        found = axe.run(page, context="#token-panel").response["violations"]
        serious = [f"{v['id']}: {v['help']} ({', '.join(n['target'][0] for n in v['nodes'][:4])})"
                   for v in found if v["impact"] in {"serious", "critical"}]
        if serious:
            blocking[step] = serious
    assert not blocking, blocking


@pytest.mark.parametrize("size", SIZES)
def test_a_focused_tokens_card_never_covers_the_token(make_context, size):
    """Walking every token by keyboard: each one's card is whole on screen and leaves the token
    itself visible (on a phone the card docks to the bottom and the page scrolls the token up)."""
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}, reduced_motion="reduce").new_page()
    open_step(page, "update")
    page.mouse.move(0, 0)
    rows = page.locator("#token-panel .completion .tokens")
    rows.nth(0).locator(".tok").first.focus()
    boxes = """() => { const t = document.activeElement, c = t.querySelector('.tok-card');
      const a = t.getBoundingClientRect(), b = c.getBoundingClientRect();
      return {t: [a.left, a.top, a.right, a.bottom], c: [b.left, b.top, b.right, b.bottom],
              vw: document.documentElement.clientWidth, vh: window.innerHeight}; }"""
    for r in range(rows.count()):
        for _ in range(rows.nth(r).locator(".tok").count()):
            box = page.evaluate(boxes)
            (tl, tt, tr, tb), (cl, ct, cr, cb) = box["t"], box["c"]
            assert cl >= 0 and ct >= 0 and cr <= box["vw"] and cb <= box["vh"], box
            assert tr <= cl or cr <= tl or tb <= ct or cb <= tt, ("the card covers its token", box)
            page.keyboard.press("ArrowRight")
        page.keyboard.press("Home")
        page.keyboard.press("ArrowDown")


@pytest.mark.parametrize("step", STEPS)
def test_on_a_phone_the_figure_starts_with_its_tokens_and_nothing_is_tiny(make_context, step):
    """Issue 20: the token panel is compact enough to be a step's focus figure at 390×844: its
    header (title, prompt, strip choice, explanation) stays short, no text in it is below 11 px,
    and a table wider than the screen scrolls in its own box, marked with its cue."""
    page = make_context(viewport={"width": 390, "height": 844}, reduced_motion="reduce").new_page()
    open_step(page, step)
    page.evaluate("() => document.dispatchEvent(new Event('htmx:afterSettle'))")  # tokens.js marks scrollers
    m = page.evaluate("""() => {
      const panel = document.querySelector('#token-panel');
      const first = panel.querySelector('.completion .tok');
      const tiny = [...panel.querySelectorAll('*')].filter(e => e.getClientRects().length
          && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())
          && parseFloat(getComputedStyle(e).fontSize) < 11).map(e => e.className || e.tagName);
      const boxes = [...panel.querySelectorAll('.table-scroll')].map(b => ({
          wide: b.scrollWidth > b.clientWidth + 1, cue: b.classList.contains('scrolls-x'),
          scrolls: ['auto', 'scroll'].includes(getComputedStyle(b).overflowX)}));
      return {header: first.getBoundingClientRect().top - panel.getBoundingClientRect().top,
              first_row_bottom: first.getBoundingClientRect().bottom + scrollY, tiny, boxes,
              sideways: document.scrollingElement.scrollWidth > window.innerWidth};
    }""")
    # what the header's bound is for: the first completion's first row of tokens is inside the 844 px
    # of the first screen (the step's text above it is one sentence now, its second folded), and the
    # header stays short
    assert m["first_row_bottom"] <= 844 and m["header"] <= 300, m
    assert m["tiny"] == [], m
    assert not m["sideways"], m
    for box in m["boxes"]:
        assert box["scrolls"] and box["cue"] == box["wide"], m
