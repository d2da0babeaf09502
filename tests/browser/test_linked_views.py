"""Linked views (static/js/linked.js): one sample, pointed at or focused anywhere in the Inspector,
is marked in the group table, the advantage bars, the clip plot, the probability bars and the
filled formulas at once, by shape and glyph as well as colour."""
import re

import pytest
from browser_helpers import wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

LINKED = re.compile(r"\bis-linked\b")
ADVANTAGES_ON_CLIP = "/walkthroughs/toy_grpo/steps/clip?node=advantages"
CLIPPED = "/walkthroughs/toy_grpo/steps/clip?node=clipped"
PROBABILITIES = "/walkthroughs/toy_grpo/steps/policy?node=policy.log_probabilities"


def open_page(page, url: str) -> None:
    page.goto(url)
    wait_settled(page)
    # The page must load static/js/linked.js itself (templates/layouts/base.html): fail, never skip.
    loaded = page.evaluate("() => document.documentElement.getAttribute('data-linked-views')")
    assert loaded == "on", "static/js/linked.js is not loaded by the page (add it to templates/layouts/base.html)"
    unfold(page)


def unfold(page) -> None:
    """The inspector's full group table is folded (the step's own table is in the story figure)."""
    fold = page.locator("details#full-table")
    if fold.count() and not fold.evaluate("d => d.open"):
        fold.locator("> summary").click()


def samples(page) -> list[dict]:
    r = page.request.get("/api/walkthroughs/toy_grpo/step", params={"step": "clip"})
    assert r.ok, r.text()
    return r.json()["samples"]


def linked(page) -> list[str]:
    """What is highlighted now, as 'tag[attribute=value]' strings."""
    return page.locator(".is-linked").evaluate_all(
        "els => els.map(e => e.tagName.toLowerCase() + (e.dataset.sample !== undefined ? '#' + e.dataset.sample"
        " : e.dataset.samples !== undefined ? '@' + e.dataset.samples : '~' + e.dataset.choice))")


def test_hovering_a_row_marks_its_sample_everywhere(page, shot):
    open_page(page, ADVANTAGES_ON_CLIP)
    group = samples(page)
    i = next(k for k, s in enumerate(group) if s["clip_active"])
    other = next(k for k, s in enumerate(group) if s["action"] != group[i]["action"])
    row = page.locator(f'#group-table-full tr[data-sample="{i}"]')
    row.hover()
    expect(row).to_have_class(LINKED)
    bar = page.locator(f'#inspector .chart-advantages g.adv-bar[data-sample="{i}"]')
    expect(bar).to_have_class(LINKED)
    expect(bar.locator(".link-frame")).to_be_visible()  # a shape, not only a colour
    marker = page.locator(f'#inspector .chart-clip g.marker[data-samples~="{i}"]')
    expect(marker).to_have_class(LINKED)
    expect(marker.locator(".link-ring")).to_be_visible()
    expect(page.locator(f'#inspector tr[data-sample="{i}"]')).to_have_count(2)  # reward input row too
    expect(page.locator(f'#advantage-inputs tr[data-sample="{i}"]')).to_have_class(LINKED)
    expect(page.locator(f'#group-table-full tr[data-sample="{other}"]')).not_to_have_class(LINKED)
    expect(page.locator(f'#inspector g.adv-bar[data-sample="{other}"]')).not_to_have_class(LINKED)
    # the row itself shows a glyph, not only a colour
    glyph = row.locator("th").evaluate("th => getComputedStyle(th, '::before').content")
    assert "▶" in glyph
    shot(page, "row-hovered")

    # moving to another row moves the mark; leaving the Inspector clears it
    page.locator(f'#group-table-full tr[data-sample="{other}"]').hover()
    expect(page.locator(f'#inspector g.adv-bar[data-sample="{other}"]')).to_have_class(LINKED)
    expect(bar).not_to_have_class(LINKED)
    page.mouse.move(1, 1)
    expect(page.locator(".is-linked")).to_have_count(0)


def test_hovering_a_row_marks_the_probability_of_its_choice(page):
    open_page(page, PROBABILITIES)
    group = samples(page)
    row = page.locator('#group-table-full tr[data-sample="0"]')
    row.hover()
    choice = group[0]["action"]
    prob = page.locator(f'#inspector .chart-probabilities g.prob-row[data-choice="{choice}"]')
    expect(prob).to_have_class(LINKED)
    expect(prob.locator(".link-mark")).to_be_visible()
    expect(page.locator("#inspector .chart-probabilities g.prob-row.is-linked")).to_have_count(1)
    # the reverse: a probability bar marks every row that chose it
    page.locator(f'#inspector .chart-probabilities rect.hit[data-choice="{choice}"]').hover()
    chose = [str(k) for k, s in enumerate(group) if s["action"] == choice]
    rows = page.locator("#group-table-full tr.is-linked")
    expect(rows).to_have_count(len(chose))
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.sample)") == chose


def test_keyboard_focus_on_a_bar_marks_its_row(page, shot):
    open_page(page, ADVANTAGES_ON_CLIP)
    first = page.locator("#inspector .chart-advantages rect.hit").first
    first.focus()
    expect(first).to_be_focused()
    expect(first).to_have_accessible_name(re.compile(r"^sample 0 \(\d · [a-z -]+\): reward"))
    page.keyboard.press("Tab")                       # the next bar, reached by the keyboard
    hit = page.locator('#inspector .chart-advantages rect.hit[data-samples="1"]')
    expect(hit).to_be_focused()
    assert hit.evaluate("el => el.matches(':focus-visible')")
    expect(page.locator('#group-table-full tr[data-sample="1"]')).to_have_class(LINKED)
    expect(page.locator('#inspector g.adv-bar[data-sample="1"]')).to_have_class(LINKED)
    expect(page.locator('#group-table-full tr[data-sample="0"]')).not_to_have_class(LINKED)
    shot(page, "bar-focused")

    # a row focused by the keyboard marks its bar; Tab on from the table clears the marks
    row = page.locator('#group-table-full tr[data-sample="2"]')
    row.focus()
    expect(row).to_be_focused()
    expect(page.locator('#inspector g.adv-bar[data-sample="2"]')).to_have_class(LINKED)
    expect(page.locator('#inspector .chart-clip g.marker[data-samples~="2"]')).to_have_class(LINKED)
    page.locator("#inspector h2").click()
    expect(page.locator(".is-linked")).to_have_count(0)


def test_a_clip_marker_marks_its_rows_and_formula_lines(page):
    open_page(page, CLIPPED)
    hit = page.locator("#inspector .chart-clip rect.hit").first
    shared = hit.get_attribute("data-samples").split()
    hit.hover()
    rows = page.locator("#group-table-full tr.is-linked")
    expect(rows).to_have_count(len(shared))
    lines = page.locator("#inspector ul.filled-formulas li.is-linked")
    expect(lines).to_have_count(len(shared))
    assert lines.evaluate_all("ls => ls.map(l => l.dataset.sample)") == shared
    # the same works after an htmx swap (delegated on document)
    page.locator("#inspector").get_by_role("link", name="ratio", exact=True).first.click()
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "ratio")
    wait_settled(page)
    unfold(page)
    page.locator('#group-table-full tr[data-sample="0"]').hover()
    expect(page.locator('#inspector ul.filled-formulas li[data-sample="0"]')).to_have_class(LINKED)


def test_group_table_fits_and_text_stays_readable(make_context, shot):
    page = make_context(viewport={"width": 1280, "height": 900}).new_page()
    open_page(page, CLIPPED)
    width = page.locator("#group-table-full").evaluate("t => t.getBoundingClientRect().width")
    assert width <= 1240, width
    assert page.locator("#group-table-full thead th").count() == 10

    phone = make_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True).new_page()
    for url in (ADVANTAGES_ON_CLIP, PROBABILITIES):
        open_page(phone, url)
        # the rendered size of every chart text (font size times the svg's scale) and of the Inspector's text
        sizes = phone.locator("#inspector").evaluate("""root => {
          const out = [];
          root.querySelectorAll('svg.chart-svg text').forEach(t => {
            const svg = t.closest('svg.chart-svg');
            const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
            out.push([t.textContent, parseFloat(getComputedStyle(t).fontSize) * scale]);
          });
          root.querySelectorAll('p, li, td, th, caption, figcaption, code, dd, dt').forEach(e => {
            if (e.textContent.trim()) out.push([e.textContent.slice(0, 30), parseFloat(getComputedStyle(e).fontSize)]);
          });
          return out; }""")
        small = [(t, s) for t, s in sizes if s < 11 - 1e-6]
        assert sizes and not small, small[:10]
    shot(phone, "phone")
