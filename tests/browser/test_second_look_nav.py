"""A second look at finding one's way (issue 49, items 5, 7, 9, 10, 12), in Chromium:

- the browser tab names the step's point (its headline), never the export's title, on every step of the three
  featured walkthroughs and after an in-page step change; the export's own title stays whole, in a quieter,
  labelled box;
- "Change the numbers" on the tiny LM lands on the changed figure; a node's click shows the Inspector's heading
  for it; O brings the graph it changes into view (390x844, 1280x720, 1920x1080);
- with a style attribute on every control (an extension or a test tool leaves one), walking the controls
  and going Back logs no CSP violation (htmx's settle copied the attribute with setAttribute, and its
  history copy kept it, both refused by the CSP);
- Next leads on, never back to the first walkthrough; a recorded step opened from its run links back to
  the run and to its neighbouring recorded steps;
- /docs links back to the app.
"""
from __future__ import annotations

import json
import re
import urllib.request

import httpx
import pytest
from browser_helpers import open_form, pan_into_view, wait_settled
from playwright.sync_api import expect

from app.house import registry

pytestmark = pytest.mark.browser

SIZES = {"390x844": (390, 844), "1280x720": (1280, 720), "1920x1080": (1920, 1080)}
SMOL_QUERY = "group_size=4&max_new_tokens=12"  # the real model's step the module computes once
FEATURED = ("toy_grpo", "tiny_lm_grpo", "smollm_grpo")
POINTS = {f.walkthrough_id: dict(f.points) for f in registry().featured}
CSP = ("Content Security Policy", "CSP violation")


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    """The repository's walkthroughs, with the real model's SMOL_QUERY step started (as its Run does)."""
    request = urllib.request.Request(f"{repo_base_url}/walkthroughs/smollm_grpo/steps/sample?{SMOL_QUERY}",
                                     method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200
    return repo_base_url


def export_titles(base_url: str, walkthrough: str) -> dict[str, str]:
    with urllib.request.urlopen(f"{base_url}/api/walkthroughs/{walkthrough}", timeout=30) as r:
        return {s["id"]: s["title"] for s in json.load(r)["steps"]}


def step_path(walkthrough: str, step: str) -> str:
    query = f"?{SMOL_QUERY}" if walkthrough == "smollm_grpo" else ""
    return f"/walkthroughs/{walkthrough}/steps/{step}{query}"


def open_step(page, walkthrough: str, step: str) -> None:
    page.goto(step_path(walkthrough, step), timeout=60_000)  # a tiny LM step is computed on its first visit
    if walkthrough == "smollm_grpo":
        page.wait_for_selector("#smol-model q", timeout=120_000)  # the recorded step's page, not its progress
    wait_settled(page)


def landed(page) -> None:
    wait_settled(page)
    page.wait_for_function("() => !document.querySelector('.htmx-settling, .htmx-swapping')")
    page.wait_for_timeout(100)


def new_page(make_context, size: str, **kwargs):
    w, h = SIZES[size]
    return make_context(viewport={"width": w, "height": h}, **kwargs).new_page()


TOP_IN_VIEW = "el => { const t = el.getBoundingClientRect().top; return t >= -1 && t < innerHeight - 40; }"
WHERE = "el => { const r = el.getBoundingClientRect(); return [Math.round(r.top), Math.round(r.bottom), innerHeight, scrollY]; }"

# -- item 5: the tab's title and the export's title box -------------------------------------------------

EXPORT_BOX = """() => {
  const box = document.querySelector('.step-export-title'), words = document.getElementById('step-export-title');
  const h1 = document.getElementById('step-title');
  const px = el => parseFloat(getComputedStyle(el).fontSize);
  const r = words.getBoundingClientRect();
  return {box: px(box), words: px(words), headline: px(h1), boxColor: getComputedStyle(box).color,
          headlineColor: getComputedStyle(h1).color, boxWeight: +getComputedStyle(box).fontWeight,
          headlineWeight: +getComputedStyle(h1).fontWeight, label: box.textContent,
          clipped: words.scrollWidth > words.clientWidth + 1 && getComputedStyle(words).overflow !== 'visible',
          ellipsis: getComputedStyle(words).textOverflow === 'ellipsis', visible: words.checkVisibility(),
          lines: r.height, inH1: !!words.closest('h1, h2, h3')};
}"""


@pytest.mark.parametrize("size", SIZES)
def test_the_tab_names_the_point_and_the_export_title_is_quiet_and_whole(make_context, base_url, size):
    page = new_page(make_context, size)
    steps = 0
    for walkthrough in FEATURED:
        titles = export_titles(base_url, walkthrough)
        for step, title in titles.items():
            open_step(page, walkthrough, step)
            point = POINTS[walkthrough][step]
            assert page.title().startswith(point), (walkthrough, step, page.title())
            assert not page.title().startswith(title), (walkthrough, step, page.title())
            expect(page.locator("#step-export-title")).to_have_text(title)   # the author's words, whole
            box = page.evaluate(EXPORT_BOX)
            assert box["words"] < box["headline"] and box["box"] < box["headline"], (walkthrough, step, box)
            assert box["boxColor"] != box["headlineColor"], box   # muted
            assert box["boxWeight"] < box["headlineWeight"], box
            assert "The export’s title" in box["label"], box  # labelled as the export's
            assert box["visible"] and not box["clipped"] and not box["ellipsis"] and not box["inH1"], box
            steps += 1
    assert steps == 17


@pytest.mark.parametrize("walkthrough", FEATURED)
def test_the_tab_follows_an_in_page_step_change(make_context, walkthrough):
    page = new_page(make_context, "1280x720")
    steps = list(POINTS[walkthrough])
    open_step(page, walkthrough, steps[0])
    page.locator("#next-step").click()
    page.wait_for_function("id => document.querySelector('.view-content')?.dataset.stepId === id", arg=steps[1])
    wait_settled(page)
    assert page.title().startswith(POINTS[walkthrough][steps[1]]), page.title()
    page.keyboard.press("ArrowLeft")   # the key's swap too
    page.wait_for_function("id => document.querySelector('.view-content')?.dataset.stepId === id", arg=steps[0])
    wait_settled(page)
    assert page.title().startswith(POINTS[walkthrough][steps[0]]), page.title()


# -- item 7: a click's result on screen -----------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_changing_the_numbers_lands_on_the_changed_figure(make_context, size):
    page = new_page(make_context, size, reduced_motion="reduce")
    open_step(page, "tiny_lm_grpo", "advantages")
    open_form(page)
    page.locator("#t-seed").fill("7")
    page.locator("#token-recompute").click()
    page.wait_for_function("() => location.search.includes('seed=7')", timeout=60_000)
    landed(page)
    figure = page.locator("#story-figure")
    assert figure.evaluate(TOP_IN_VIEW), figure.evaluate(WHERE)


def visible_node(page, but: str | None = None) -> str:
    """A node whose box is inside the graph frame (one a reader can click)."""
    return page.evaluate("""but => {
      const f = document.querySelector('.graph-frame').getBoundingClientRect();
      for (const g of document.querySelectorAll('.graph .node[data-node-id]:not(.container)')) {
        const r = g.querySelector(':scope > rect').getBoundingClientRect();
        if (g.dataset.nodeId !== but && r.left > f.left + 4 && r.right < f.right - 4 && r.top > f.top + 4
            && r.bottom < f.bottom - 4) return g.dataset.nodeId;
      }
      return null; }""", but)


@pytest.mark.parametrize("size", SIZES)
def test_a_node_click_shows_the_inspector_heading(make_context, size):
    page = new_page(make_context, size, reduced_motion="reduce")
    open_step(page, "toy_grpo", "advantages")
    target = page.locator('.graph [data-node-id="ratio"]')
    pan_into_view(page, target.locator(":scope > rect").first)
    target.locator(":scope > rect").first.click()
    page.wait_for_function("() => document.querySelector('[data-node-title]')?.dataset.nodeTitle === 'ratio'")
    landed(page)
    heading = page.locator("#inspector .node-title")
    assert heading.evaluate(TOP_IN_VIEW), heading.evaluate(WHERE)
    ratio = page.locator('.graph [data-node-id="ratio"]')
    on_screen = "el => { const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; }"
    assert ratio.evaluate(on_screen), ratio.evaluate(WHERE)   # the node clicked stays on screen
    expect(ratio).to_be_focused()


@pytest.mark.parametrize("size", SIZES)
def test_the_overview_key_brings_the_graph_into_view(make_context, size):
    page = new_page(make_context, size, reduced_motion="reduce")
    open_step(page, "toy_grpo", "advantages")
    page.evaluate("window.scrollTo(0, 0)")
    page.locator("#step-title").click()   # focus on the page, not in a field
    page.keyboard.press("o")
    page.wait_for_function("() => document.getElementById('overview-toggle')?.getAttribute('aria-pressed') === 'true'")
    landed(page)
    frame = page.locator(".graph-frame")
    top, bottom, height, _ = frame.evaluate(WHERE)
    assert top >= -1 and bottom <= height + 1 or top >= -1 and top < height / 3, (top, bottom, height)


# -- item 9: no CSP violation once a control carries a style attribute ----------------------------------

PLANT = """() => { let n = 0;
  // through the CSSOM, as an extension's script would: the attribute appears, and planting it breaks no rule
  document.querySelectorAll('input, select, button').forEach(el => { el.style.outline = '0'; n++; });
  return n; }"""


def csp_errors(page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda m: m.type == "error" and any(c in m.text for c in CSP) and seen.append(m.text))
    return seen


def test_a_planted_style_attribute_makes_no_csp_error_on_any_swap(make_context, problems):
    problems.allowed.extend(CSP)   # counted here, by action, rather than listed by the fixture
    page = new_page(make_context, "1280x720", reduced_motion="reduce")
    seen = csp_errors(page)
    counts = {}

    open_step(page, "toy_grpo", "advantages")                # a step change
    assert page.evaluate(PLANT) > 10
    page.locator("#next-step").click()
    page.wait_for_function("() => document.querySelector('.view-content')?.dataset.stepId === 'clip'")
    landed(page)
    counts["step change"] = len(seen)

    assert page.evaluate(PLANT) > 10                        # a slider key (the clip step's ε)
    slider = page.locator("#figure-control input[type=range]")
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => location.search.includes('clip_epsilon')")
    landed(page)
    counts["slider key"] = len(seen) - counts["step change"]

    open_step(page, "smollm_grpo", "blocks")                # a real-model node click
    assert page.evaluate(PLANT) > 10
    node = visible_node(page, page.evaluate("() => document.querySelector('[data-node-title]')?.dataset.nodeTitle"))
    assert node is not None
    page.locator(f'.graph [data-node-id="{node}"] > rect').first.click()
    page.wait_for_function("id => document.querySelector('[data-node-title]')?.dataset.nodeTitle === id", arg=node)
    landed(page)
    counts["node click"] = len(seen) - sum(counts.values())

    page.go_back()                                          # Back: htmx puts its copy of the page back
    page.wait_for_function("() => !document.querySelector('[data-node-title]') || "
                           "document.querySelector('[data-node-title]').dataset.nodeTitle !== "
                           f"{json.dumps(node)}")
    wait_settled(page)
    counts["back"] = len(seen) - sum(counts.values())
    assert counts == {"step change": 0, "slider key": 0, "node click": 0, "back": 0}, (counts, seen[:2])


# -- item 10: Next leads on -----------------------------------------------------------------------------

def test_the_last_steps_lead_on_never_back_to_the_first_walkthrough(make_context):
    page = new_page(make_context, "1280x720")
    starts = {}
    for walkthrough in FEATURED:
        starts[walkthrough] = f"/walkthroughs/{walkthrough}/steps/{next(iter(POINTS[walkthrough]))}"
    nexts = {}
    for walkthrough in FEATURED:
        open_step(page, walkthrough, list(POINTS[walkthrough])[-1])
        nexts[walkthrough] = page.locator("a#next-step").get_attribute("href")
    assert nexts["toy_grpo"] == starts["tiny_lm_grpo"], nexts
    assert nexts["tiny_lm_grpo"] == starts["smollm_grpo"], nexts
    assert nexts["smollm_grpo"] == "/walkthroughs/new", nexts   # your own run: the story's last chapter
    assert not any("toy_grpo" in href for href in nexts.values()), nexts
    expect(page.locator("a#next-step")).to_contain_text("your own")


def test_a_recorded_step_of_a_run_links_back_to_its_run(make_context, base_url):
    r = httpx.post(base_url + "/api/runs/examples/trl", timeout=120)
    assert r.status_code in (200, 201), r.text
    run_url = r.json()["url"]
    page = new_page(make_context, "1280x720")
    page.goto(run_url)
    links = page.locator(".run-record-link")
    assert links.count() == 4
    records = links.evaluate_all("els => els.map(e => e.getAttribute('href'))")
    links.nth(1).click()
    page.wait_for_url(f"**{records[1]}/steps/**", timeout=60_000)
    wait_settled(page)
    part = page.locator("#part-of")
    expect(part.locator(f'a[href^="{run_url}"]')).to_be_visible()                 # back to the run
    expect(part.locator("a[rel=prev]")).to_have_attribute("href", records[0])   # its neighbours
    expect(part.locator("a[rel=next]")).to_have_attribute("href", records[2])
    # its last step's Next goes on to the run's next recorded step, never to the first walkthrough
    last = page.locator(".step-dots a").last
    last_id = last.inner_text().split(". ", 1)[1]
    last.click()
    page.wait_for_function("id => document.querySelector('.view-content')?.dataset.stepId === id", arg=last_id)
    wait_settled(page)
    expect(page.locator("a#next-step")).to_have_attribute("href", records[2])
    # the run's last recorded step leads back to the run itself
    page.goto(records[3])
    wait_settled(page)
    expect(page.locator("#part-of a[rel=next]")).to_have_count(0)
    page.locator(".step-dots a").last.click()
    page.wait_for_function("id => document.querySelector('.view-content')?.dataset.stepId === id", arg=last_id)
    wait_settled(page)
    expect(page.locator("a#next-step")).to_have_attribute("href", re.compile("^" + re.escape(run_url)))


# -- item 12: /docs leads back ---------------------------------------------------------------------------

def test_the_api_docs_link_back_to_the_app(page):
    page.goto("/docs")
    home = page.locator('a[href="/"]')
    expect(home.first).to_be_visible()
    expect(page.locator('a[href="/walkthroughs"]').first).to_be_visible()
