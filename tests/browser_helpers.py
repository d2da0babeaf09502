"""Shared facts about toy_grpo's tour and small page helpers for the browser tests."""
from __future__ import annotations

import re
from dataclasses import dataclass

from playwright.sync_api import Page, expect

from app.kinds.toy.views.story import STORIES

WALKTHROUGH = "/walkthroughs/toy_grpo"


@dataclass(frozen=True)
class Step:
    id: str
    index: int                 # 1-based, as "Step k of 4" shows it
    title: str
    camera: str                # the saved camera as the SVG transform
    selected: str              # the step's highlighted node

    @property
    def path(self) -> str:
        return f"{WALKTHROUGH}/steps/{self.id}"

    @property
    def point(self) -> str:
        """The step's headline: the sentence it teaches (the toy's story), not the export's title."""
        return STORIES[self.id].point


STEPS = [
    Step("policy", 1, "Keep architecture separate from the training recipe",
         "translate(308.5 6) scale(1.25)", "policy.logits"),
    Step("advantages", 2, "Compare a completion’s reward with its group",
         "translate(-1045 50) scale(1.25)", "advantages"),
    Step("clip", 3, "Limit the surrogate incentive using old-policy ratios",
         "translate(-1770 -57) scale(1.25)", "clipped"),
    Step("reference", 4, "Retain a reference signal and distinguish later stages",
         "translate(-2065 50) scale(1.25)", "divergence"),
]
BY_ID = {s.id: s for s in STEPS}


def node(page: Page, node_id: str):
    return page.locator(f'.graph [data-node-id="{node_id}"]')


def pan_into_view(page: Page, locator) -> None:
    """Drag the graph, as a user would, until locator's centre is the frame's centre.

    A step's camera can leave a node outside the frame (overflow: hidden clips it), where
    no click can reach it. The frame sits under the story row: scroll it into view first."""
    page.locator(".graph-frame").scroll_into_view_if_needed()
    frame = page.locator(".graph-frame").bounding_box()
    box = locator.bounding_box()
    dx = frame["x"] + frame["width"] / 2 - (box["x"] + box["width"] / 2)
    dy = frame["y"] + frame["height"] / 2 - (box["y"] + box["height"] / 2)
    x = frame["x"] + (10 if dx > 0 else frame["width"] - 10)
    y = frame["y"] + frame["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx, y + dy, steps=8)
    page.mouse.up()
    page.wait_for_function(
        "([el, cx, cy]) => { const r = el.getBoundingClientRect();"
        " return Math.abs(r.x + r.width / 2 - cx) < 30 && Math.abs(r.y + r.height / 2 - cy) < 30; }",
        arg=[locator.element_handle(), frame["x"] + frame["width"] / 2, frame["y"] + frame["height"] / 2])


def open_form(page: Page) -> None:
    """Unfold "Change the numbers" (folded except on a step about a parameter)."""
    fold = page.locator("details#change-numbers")
    if not fold.evaluate("d => d.open"):
        fold.locator("> summary").click()


def wait_settled(page: Page) -> None:
    """No htmx request in flight, the camera fitted (app.js does it in the first frame), no
    camera tween running and the last swap landed (focus and scroll: static/js/landing.js)."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request') && !document.querySelector('#camera[data-moving]')"
        " && !document.documentElement.hasAttribute('data-landing')"
        " && typeof htmx !== 'undefined'"
        " && !document.querySelector('.graph-frame:not([data-fitted]), .graph-frame[data-panning]')")


def expect_step(page: Page, step: Step, *, announced: bool = True, query: str = "") -> None:
    """Everything that shows which step is on screen, once the camera has settled."""
    # Wait on animation frames first: expect() polls with growing pauses (up to 1 s).
    page.wait_for_function(
        "id => document.querySelector('.view-content')?.getAttribute('data-step-id') === id"
        " && !document.querySelector('#camera[data-moving]') && !document.querySelector('.htmx-request')",
        arg=step.id)
    expect(page.locator("#step-export-title")).to_have_text(step.title)
    expect_headline(page, step.point)
    expect(page.locator(".step-count")).to_have_text(f"Step {step.index} of 4")
    expect(page).to_have_url(re.compile(re.escape(step.path + query) + "$"))
    # The saved camera, fitted to this frame (static/js/camera.js), with the selection whole.
    expect(page.locator("#camera")).to_have_attribute("transform", fitted_transform(page))
    expect(page.locator("#camera")).not_to_have_attribute("data-moving", "true")
    expect_framed(page, [step.selected])
    selected = page.locator(".graph .node.selected")
    expect(selected).to_have_count(1)
    expect(selected).to_have_attribute("data-node-id", step.selected)
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", step.selected)
    if announced:
        expect(page.locator("#announcer")).to_have_text(f"Step {step.index} of 4: {step.point}")


def expect_headline(page: Page, point: str) -> None:
    """The step's first line reads its point (as shown: a glossary term's folded definition inside
    it is not text on screen)."""
    expect(page.locator("#step-title")).to_have_text(point, use_inner_text=True)


def fitted_transform(page: Page) -> str:
    """The camera app.js fitted to the frame, as the transform it writes (JS number printing)."""
    return page.evaluate("""() => {
      const [x, y, z] = document.querySelector('.graph-frame').getAttribute('data-fitted').split(',').map(Number);
      return 'translate(' + x + ' ' + y + ') scale(' + z + ')';
    }""")


def frame_gaps(page: Page, node_id: str) -> dict:
    """Pixels between the node's box and each edge of the graph frame (negative: cut off)."""
    return page.evaluate("""id => {
      const f = document.querySelector('.graph-frame').getBoundingClientRect();
      const el = document.querySelector('.graph [data-node-id="' + CSS.escape(id) + '"] > rect');
      const r = el.getBoundingClientRect();
      return {left: r.left - f.left, top: r.top - f.top, right: f.right - r.right, bottom: f.bottom - r.bottom};
    }""", node_id)


def expect_framed(page: Page, node_ids, margin: float = 6.0) -> None:
    """Each node's box is whole inside the graph frame, at least `margin` px from every edge."""
    for node_id in node_ids:
        gaps = frame_gaps(page, node_id)
        assert min(gaps.values()) >= margin, (node_id, gaps)


def numbers(page: Page, selector: str) -> list[float]:
    """Full-precision values (data-value, Python's repr) of the .num cells under selector."""
    return [float(v) for v in page.locator(f"{selector} .num").evaluate_all(
        "cells => cells.map(c => c.getAttribute('data-value'))")]


def flat(values) -> list[float]:
    if values is None:
        return []
    if isinstance(values, (int, float)):
        return [float(values)]
    out: list[float] = []
    for v in values:
        out.extend(flat(v))
    return out


SAMPLE_COLUMNS = ("reward", "advantage", "ratio", "clipped", "divergence", "objective", "ratio_grad")


def expect_inspector_matches_api(page: Page, node_id: str, api: dict) -> None:
    """The Inspector's values, gradient and group table equal the JSON API's, float for float."""
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", node_id)
    record = api["nodes"][node_id]
    values = numbers(page, '#inspector [data-tensor="values"]')
    grads = numbers(page, '#inspector [data-tensor="grad"]')
    assert values and values == flat(record["values"]), (values, record["values"])
    assert grads == flat(record["grad"]), (grads, record["grad"])
    rows = page.locator("#group-table-full tbody tr")   # every term; the story's table shows the step's
    expect(rows).to_have_count(len(api["samples"]))
    table = numbers(page, "#group-table-full tbody tr")
    assert table == [float(s[k]) for s in api["samples"] for k in SAMPLE_COLUMNS]


# axe-core's impacts that fail a page (tests/browser/test_accessibility.py and each kind's page tests)
BLOCKING = {"serious", "critical"}

def axe_blocking(page, axe, urls, settle) -> dict[str, list]:
    """Each url's serious or critical axe-core violations (urls without any left out), each page
    settled by `settle(page)` before axe runs."""
    blocking = {}
    for url in urls:
        page.goto(url)
        settle(page)
        violations = [v for v in axe.run(page).response["violations"] if v["impact"] in BLOCKING]
        if violations:
            blocking[url] = violations
    return blocking


def describe(violations) -> str:
    return "\n".join(f"{v['id']} ({v['impact']}): {v['help']} -> "
                     + "; ".join(", ".join(n["target"]) for n in v["nodes"][:8])
                     for v in violations)


# The step's focus figure and the point above it, as the first view shows them
FOCUS_BOX = """() => { const f = document.querySelector('[data-step-focus]');
  const p = document.querySelector('#step-point'); if (!f || !p) return null;
  const r = f.getBoundingClientRect(), q = p.getBoundingClientRect();
  // every box inside the figure that scrolls sideways (a figure cut at the screen's edge)
  const scrollers = [f, ...f.querySelectorAll('*')].filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
      && e.scrollWidth > e.clientWidth + 1).map(e => `${e.tagName.toLowerCase()}.${e.getAttribute('class')}`
      + ` ${e.scrollWidth}/${e.clientWidth}`);
  return {name: f.dataset.stepFocus, top: r.top, bottom: r.bottom, height: r.height, left: r.left,
          pointBottom: q.bottom, pointRight: q.right, vh: window.innerHeight, vw: window.innerWidth,
          sideways: document.scrollingElement.scrollWidth > window.innerWidth,
          figureOverflow: f.scrollWidth - f.clientWidth, scrollers}; }"""

def fills_first_view(box: dict) -> bool:
    """Wholly in the first viewport, or filling at least 60 % of it (issue 32: on a phone the point
    above the figure took the rest)."""
    visible = min(box["bottom"], box["vh"]) - max(box["top"], 0)
    return box["top"] >= 0 and (box["bottom"] <= box["vh"] or visible >= 0.6 * box["vh"])


def expect_figure_fits(box: dict, where: str) -> None:
    """The step's figure fits its column: nothing in it scrolls sideways and it overflows nothing."""
    assert box["figureOverflow"] <= 1, f"{where}: the figure is {box['figureOverflow']} px wider than its box"
    assert not box["scrollers"], f"{where}: scrolls sideways: {box['scrollers']}"


def mostly_in_first_view(box: dict) -> bool:
    """Wholly in the first viewport, or starting in its upper two thirds and filling at least a
    third of it (a figure taller than the screen cannot be whole)."""
    visible = min(box["bottom"], box["vh"]) - max(box["top"], 0)
    return box["top"] >= 0 and (box["bottom"] <= box["vh"]
                                or (box["top"] <= box["vh"] * 2 / 3 and visible >= box["vh"] / 3))


def upload_small_record(base_url: str) -> str:
    """A small packed two-group record (tests/record_factory.py) uploaded to the server: its walkthrough id."""
    import json

    import httpx
    from record_factory import make_record

    record = make_record(seed=3, groups=2, size=4, lengths=(40, 300), packed=True)
    r = httpx.post(base_url + "/api/walkthroughs", timeout=120, files={
        "file": ("small.grpo-step.json", json.dumps(record).encode(), "application/json")})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]
