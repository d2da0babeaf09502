"""The guided tour: Next/Previous, arrow keys, camera moves, announcements, history."""
import itertools
import re

import pytest
from browser_helpers import STEPS, expect_step, fitted_transform, wait_settled
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_home_then_every_step_with_the_next_button(page, shot):
    page.goto("/")
    shot(page, "0-home")
    page.locator("a#start").click()     # the story starts at step 1 (the export opens on step 2)
    expect_step(page, STEPS[0], announced=False)
    page.get_by_role("button", name="Next").click()
    expect_step(page, STEPS[1])
    wait_settled(page)
    expect(page.locator(".graph .node.selected")).to_have_attribute("data-node-id", "advantages")
    expect(page.locator("#camera")).to_have_attribute("transform", fitted_transform(page))

    page.get_by_role("button", name="Previous").click()
    expect_step(page, STEPS[0])
    expect(page).to_have_title(re.compile("^" + re.escape(STEPS[0].point)))   # the tab names the point (issue 49)
    shot(page, "1-policy")
    # the first step has no Previous link, only a disabled placeholder
    expect(page.locator("#prev-step[href]")).to_have_count(0)
    expect(page.get_by_role("button", name="Previous")).to_have_attribute("aria-disabled", "true")

    for step in STEPS[1:]:
        page.get_by_role("button", name="Next").click()
        expect_step(page, step)
        expect(page).to_have_title(re.compile("^" + re.escape(step.point)))
        shot(page, f"{step.index}-{step.id}")
    # the last featured walkthrough here leads on to the reader's own run, never back (issue 49)
    expect(page.locator("#next-step")).to_have_attribute("href", "/walkthroughs/new")
    # Next was clicked with the mouse: the title of the new step is on screen
    expect(page.locator("#step-title")).to_be_in_viewport()


def test_arrow_keys_move_between_steps(make_context):
    page = make_context(reduced_motion="reduce").new_page()
    page.goto(STEPS[0].path)
    wait_settled(page)
    for step in STEPS[1:]:
        page.keyboard.press("ArrowRight")
        expect_step(page, step)
    # last step: → would lead on to the reader's own run, as Next does (issue 49); not pressed here
    expect(page.locator("#next-step")).to_have_attribute("href", "/walkthroughs/new")
    for step in reversed(STEPS[:-1]):
        page.keyboard.press("ArrowLeft")
        expect_step(page, step)
    # typing in a field must not turn the page (the form is folded on this step: open it)
    page.locator("#change-numbers > summary").click()
    page.locator("#p-seed").focus()
    page.keyboard.press("ArrowRight")
    wait_settled(page)
    expect_step(page, STEPS[0])


# Records #camera's transform right after app.js handled the swap (its listener was
# added first, so it runs first), then once per animation frame until the tween ends.
RECORD_CAMERA = """
() => {
  window.__camera = {afterSwap: null, frames: []};
  document.addEventListener("htmx:afterSwap", () => {
    const cam = document.getElementById("camera");
    window.__camera.afterSwap = cam.getAttribute("transform");
    const sample = () => {
      const c = document.getElementById("camera");
      window.__camera.frames.push(c.getAttribute("transform"));
      if (c.hasAttribute("data-moving") || window.__camera.frames.length < 2) requestAnimationFrame(sample);
      else window.__camera.done = true;
    };
    requestAnimationFrame(sample);
  }, {once: true});
}
"""


def test_reduced_motion_jumps_to_the_fitted_camera(make_context):
    page = make_context(reduced_motion="reduce").new_page()
    page.goto(STEPS[1].path)
    wait_settled(page)
    page.evaluate(RECORD_CAMERA)
    page.get_by_role("button", name="Next").click()
    page.wait_for_function("() => window.__camera.done === true")
    record = page.evaluate("window.__camera")
    end = fitted_transform(page)
    assert record["afterSwap"] == end
    assert set(record["frames"]) == {end}
    expect_step(page, STEPS[2])


def test_camera_tweens_between_steps_without_reduced_motion(make_context):
    page = make_context(reduced_motion="no-preference").new_page()
    page.goto(STEPS[1].path)
    wait_settled(page)
    start = fitted_transform(page)
    page.evaluate(RECORD_CAMERA)
    page.get_by_role("button", name="Next").click()
    page.wait_for_function("() => window.__camera.done === true")
    record = page.evaluate("window.__camera")
    end = fitted_transform(page)
    assert record["afterSwap"] == start             # the tween starts from the old camera
    assert record["frames"][-1] == end              # and lands exactly on the fitted one
    between = [f for f in record["frames"] if f not in (start, end)]
    assert between, record["frames"]
    xs = [float(re.match(r"translate\((\S+) ", f).group(1)) for f in record["frames"]]
    # the tween moves steadily in its direction of travel (dot's layout decides which way)
    step = 1 if xs[-1] >= xs[0] else -1
    assert all(step * (b - a) >= -1e-9 for a, b in itertools.pairwise(xs)), xs
    expect_step(page, STEPS[2])


def test_back_and_forward_restore_steps(page, shot):
    page.goto(STEPS[1].path)
    wait_settled(page)
    page.get_by_role("button", name="Next").click()
    expect_step(page, STEPS[2])
    page.go_back()
    expect_step(page, STEPS[1], announced=False)
    shot(page, "back")
    page.go_forward()
    expect_step(page, STEPS[2], announced=False)
    # the restored page still works: Next and the zoom buttons act on the live view
    page.get_by_role("button", name="Zoom in").click()
    expect(page.locator(".pan-target")).not_to_have_attribute("style", re.compile(r"scale\(1\)"))
    page.get_by_role("button", name="Next").click()
    expect_step(page, STEPS[3])
