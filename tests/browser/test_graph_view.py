"""The graph: expanding modules by mouse and keyboard, focus across swaps, pan and zoom."""
import re
from urllib.parse import parse_qs, urlparse

import pytest
from browser_helpers import BY_ID, node, pan_into_view, wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

IDENTITY = re.compile(r"scale\(1\) translate\(0px, 0px\)")


def show_frame(page) -> None:
    """The graph sits under the step's story: scroll it into the window, as a person would
    before dragging or wheeling over it."""
    page.locator(".graph-frame").scroll_into_view_if_needed()


def query(page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_expand_and_collapse_a_module_with_the_toggle(page, shot):
    page.goto(BY_ID["advantages"].path)
    wait_settled(page)
    show_frame(page)
    members = [node(page, "policy.logits"), node(page, "policy.log_probabilities")]
    for m in members:
        expect(m).to_have_count(0)
    toggle = node(page, "policy").locator(".toggle-link")
    expect(toggle).to_have_accessible_name("Expand Policy π_θ")
    pan_into_view(page, node(page, "policy"))   # the step's camera shows advantages, not policy
    toggle.click()
    for m in members:
        expect(m).to_be_visible()
    expect(node(page, "policy")).to_have_class(re.compile(r"\bexpanded\b"))
    assert "policy" in query(page)["expanded"][0].split(",")
    inspector = page.get_by_role("region", name="Inspector")
    expect(inspector.locator("[data-node-title]")).to_have_attribute("data-node-title", "policy")
    expect(page.locator("#announcer")).to_have_text("Inspector: policy")
    wait_settled(page)
    shot(page, "expanded")

    # the swap kept the user's pan: the opened module's toggle is still in the frame
    assert inside_frame(page, node(page, "policy").locator(".toggle-hit")), pan_style(page)
    expect(node(page, "policy").locator(".toggle-link")).to_have_accessible_name("Collapse Policy π_θ")
    # a click on a module's body selects it and leaves it as it was
    node(page, "policy.logits").locator(".op").click()
    expect(inspector.locator("[data-node-title]")).to_have_attribute("data-node-title", "policy.logits")
    node(page, "policy").locator(".op").first.click()
    expect(inspector.locator("[data-node-title]")).to_have_attribute("data-node-title", "policy")
    expect(node(page, "policy")).to_have_class(re.compile(r"\bexpanded\b"))
    node(page, "policy").locator(".toggle-link").click()
    for m in members:
        expect(m).to_have_count(0)
    expect(node(page, "policy")).not_to_have_class(re.compile(r"\bexpanded\b"))
    assert "policy" not in ",".join(query(page).get("expanded", []))
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["advantages"].title)


def test_enter_selects_a_module_its_toggle_opens_it_and_focus_stays(page):
    page.goto(BY_ID["advantages"].path)
    wait_settled(page)
    ratio = node(page, "ratio")
    # Tab from the last toolbar button reaches the graph's nodes: each node is one Tab stop.
    # Tab on to a node outside this step's camera (which frames advantages and its neighbours,
    # at a readable zoom): it is panned into the frame
    outside = page.evaluate("""() => Array.from(document.querySelectorAll('.graph [data-node-id]')).map(el => {
        const f = el.closest('.graph-frame').getBoundingClientRect(), b = el.getBoundingClientRect();
        return [el.getAttribute('data-node-id'), f.left <= b.left && b.right <= f.right && f.top <= b.top && b.bottom <= f.bottom];
      }).filter(p => !p[1]).map(p => p[0])""")
    assert outside, "the whole graph fits at this step's camera: nothing to pan to"
    inp = node(page, outside[-1])
    assert not inside_frame(page, inp)
    page.get_by_role("button", name="Zoom out").focus()
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_attribute("data-node-id", re.compile(".+"))
    for _ in range(30):
        if inp.evaluate("el => el === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(inp).to_be_focused()
    assert inp.evaluate("el => getComputedStyle(el).outlineStyle") != "none"
    # Each Tab pans its node into view on the next animation frame: the pans of the nodes tabbed
    # through come first, so wait for this node's own (on a loaded machine the check raced them).
    page.wait_for_function("""el => { const f = el.closest('.graph-frame').getBoundingClientRect(),
        b = el.getBoundingClientRect();
        return f.left <= b.left && b.right <= f.right && f.top <= b.top && b.bottom <= f.bottom; }""",
                           arg=inp.element_handle(), timeout=5_000)
    assert inside_frame(page, inp), (inp.bounding_box(), page.locator(".graph-frame").bounding_box())
    # Enter on a module selects it (it stays closed); Enter on its ± opens it
    ratio.focus()
    expect(ratio).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "ratio")
    expect(node(page, "ratio")).to_be_focused()
    expect(node(page, "python@ratio#0")).to_have_count(0)
    node(page, "ratio").locator(".toggle-link").focus()
    page.keyboard.press("Enter")
    expect(node(page, "python@ratio#0")).to_be_visible()
    expect(node(page, "ratio").locator(".toggle-link")).to_be_focused()
    assert "ratio" in query(page)["expanded"][0].split(",")
    # Space works like Enter, and the member can be selected from the keyboard too
    node(page, "python@ratio#0").focus()
    page.keyboard.press(" ")
    expect(page.locator("[data-node-title]")).to_have_attribute("data-node-title", "python@ratio#0")
    expect(node(page, "python@ratio#0")).to_be_focused()
    expect(node(page, "python@ratio#0")).to_have_class(re.compile(r"\bselected\b"))
    expect(node(page, "python@ratio#0")).to_have_attribute("aria-current", "true")
    assert query(page)["node"] == ["python@ratio#0"]

    # ArrowRight on a focused node turns the page; focus stays on that node, which is
    # panned into the frame once the camera has landed
    node(page, "advantages").focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["clip"].title)
    expect(node(page, "advantages")).to_be_focused()
    page.wait_for_function(FULLY_INSIDE_FRAME, arg=node(page, "advantages").element_handle())


FULLY_INSIDE_FRAME = """el => {
  const f = el.closest('.graph-frame').getBoundingClientRect(), b = el.getBoundingClientRect();
  return !document.querySelector('#camera[data-moving]')
    && f.left <= b.left && b.right <= f.right && f.top <= b.top && b.bottom <= f.bottom;
}"""


# A point in the frame's lower left where nothing is drawn (no node, edge or tag under it).
EMPTY_SPOT = """() => {
  const f = document.querySelector('.graph-frame').getBoundingClientRect();
  for (let dy = 20; dy < f.height - 100; dy += 10) for (let dx = 20; dx < f.width - 140; dx += 10) {
    const x = f.left + dx, y = f.bottom - dy, el = document.elementFromPoint(x, y);
    if (el && (el.id === 'graph' || el.classList.contains('pan-target') || el.classList.contains('graph-frame'))) return [x, y];
  }
  return [f.left + 20, f.bottom - 20];
}"""


def inside_frame(page, locator) -> bool:
    f, b = page.locator(".graph-frame").bounding_box(), locator.bounding_box()
    return (f["x"] <= b["x"] and b["x"] + b["width"] <= f["x"] + f["width"]
            and f["y"] <= b["y"] and b["y"] + b["height"] <= f["y"] + f["height"])


def pan_style(page) -> str:
    return page.locator(".pan-target").get_attribute("style") or ""


def test_pan_and_zoom(make_context, shot):
    # reduced motion: Panzoom then sets the transform without a CSS transition
    page = make_context(reduced_motion="reduce").new_page()
    page.goto(BY_ID["clip"].path)
    wait_settled(page)
    show_frame(page)
    target = page.locator(".pan-target")
    expect(target).to_have_attribute("style", IDENTITY)
    reset = page.get_by_role("button", name="Reset view")
    expect(reset).to_be_visible()

    page.get_by_role("button", name="Zoom in").click()
    expect(target).to_have_attribute("style", re.compile(r"scale\(1\.2\d*\)"))
    reset.click()
    expect(target).to_have_attribute("style", IDENTITY)

    page.locator("body").press("+")
    expect(target).to_have_attribute("style", re.compile(r"scale\(1\.2\d*\)"))
    page.locator("body").press("-")
    page.locator("body").press("-")
    expect(target).to_have_attribute("style", re.compile(r"scale\(0\.8\d*\)"))
    page.locator("body").press("0")
    expect(target).to_have_attribute("style", IDENTITY)

    # drag on an empty part of the frame pans, and does not select a node
    frame = page.locator(".graph-frame").bounding_box()
    x, y = page.evaluate(EMPTY_SPOT)
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 60, y - 40, steps=6)
    page.mouse.move(x + 120, y - 80, steps=6)
    page.mouse.up()
    expect(target).not_to_have_attribute("style", IDENTITY)
    panned = re.search(r"translate\((-?[\d.]+)px, (-?[\d.]+)px\)", pan_style(page))
    assert panned and float(panned.group(1)) > 50 and float(panned.group(2)) < -30, pan_style(page)
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["clip"].title)

    # Shift+arrow pans by keyboard
    reset.click()
    page.locator("body").press("Shift+ArrowLeft")
    expect(target).to_have_attribute("style", re.compile(r"translate\(60px, 0px\)"))

    # the wheel zooms (towards the pointer)
    reset.click()
    frame = page.locator(".graph-frame").bounding_box()
    page.mouse.move(frame["x"] + frame["width"] / 2, frame["y"] + frame["height"] / 2)
    page.mouse.wheel(0, -200)
    expect(target).to_have_attribute("style", re.compile(r"scale\(1\.\d+\)"))
    shot(page, "zoomed")
    reset.click()
    expect(target).to_have_attribute("style", IDENTITY)
    # a zoom survives nothing: the next step starts at identity with its own camera
    page.get_by_role("button", name="Zoom in").click()
    page.get_by_role("button", name="Next").click()
    expect(page.locator("#step-export-title")).to_have_text(BY_ID["reference"].title)
    expect(target).to_have_attribute("style", IDENTITY)
    page.get_by_role("button", name="Zoom in").click()
    expect(target).to_have_attribute("style", re.compile(r"scale\(1\.2\d*\)"))
