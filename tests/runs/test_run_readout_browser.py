"""The run explorer's readout and smoothing (issue 50) in Chromium at 390×844, 1280×720 and 1920×1080, on the
shipped TRL run (120 steps, 27 metrics): pointing at one chart reads every chart at that step (a rule at the
step, each chart's logged value, the step said); ← → Home End on a focused chart move it, Escape hides it; a
chart's dot is still a link; the smoothing control changes the URL and draws the smoothed line in place, the
readout then saying both values; nothing scrolls sideways and no readout overlaps other text. Without script the
smoothing form re-renders the page. Screenshots: test-output/screenshots/run-readout/."""
from __future__ import annotations

import json

import pytest
from paths import ROOT
from playwright.sync_api import Page, expect
from run_browser import NO_SIDEWAYS_SCROLL, SIZES, example_run_url, shoot

from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.run_smoothing import ema
from app.runs.examples import RUN_EXAMPLE
from app.runs.views.run_charts import cell

pytestmark = pytest.mark.browser

SHOTS = ROOT / "test-output" / "screenshots" / "run-readout"
LOG = read_trainer_state(RUN_EXAMPLE.read_bytes())
LOGGED = {e["step"]: e for e in json.loads(RUN_EXAMPLE.read_text())["log_history"] if "loss" in e}

# every chart: its metric, its readout's text, whether its rule is shown and at the x of its point's dot
READ = """() => Array.from(document.querySelectorAll('#run-charts figure.run-chart')).map(f => {
  const g = f.querySelector('.run-readout-layer.is-on'), rule = g && g.querySelector('.run-readout-rule');
  return {name: f.dataset.metric, text: f.querySelector('.run-readout').textContent,
          rule: rule ? +rule.getAttribute('x1') : null}; })"""
# a readout's box against its figure's title and plot, and its text not cut
OVERLAPS = """() => Array.from(document.querySelectorAll('#run-charts figure.run-chart')).flatMap(f => {
  const p = f.querySelector('.run-readout'), r = p.getBoundingClientRect();
  const bad = [];
  for (const other of [f.querySelector('figcaption'), f.querySelector('svg')]) {
    const o = other.getBoundingClientRect();
    if (r.bottom > o.top + 0.5 && o.bottom > r.top + 0.5) bad.push(f.dataset.metric + ' over ' + other.tagName);
  }
  if (p.scrollWidth > p.clientWidth + 1) bad.push(f.dataset.metric + ' cut: ' + p.textContent);
  return bad; })"""
# the client point of a chart's step, from the data the server put on its <svg>
POINT_AT = """([sel, step]) => { const svg = document.querySelector(sel), r = svg.getBoundingClientRect();
  const [left, right] = svg.dataset.plot.split(' ').map(Number), lo = +svg.dataset.xLo, hi = +svg.dataset.xHi;
  const x = left + (step - lo) / (hi - lo) * (right - left);
  return {x: r.left + x / svg.viewBox.baseVal.width * r.width, y: r.top + r.height * 0.5}; }"""


def smoothed_label(name: str, step: int, w: float) -> str:
    values = [v for _, v in LOG.series(name)]
    v = ema(values, w)[step - 1]
    return cell(0.0 if abs(v) < max(abs(x) for x in values) * 1e-6 else v)  # run_charts: 0 at a millionth


def expect_read(page: Page, step: int, smooth: float = 0.0) -> list[dict]:
    page.wait_for_function("s => document.querySelector('#run-charts .run-readout.is-reading .run-readout-step')"
                           "?.textContent === 'step ' + s", arg=step)
    charts = page.evaluate(READ)
    assert len(charts) == 27
    for c in charts:
        want = f"step {step}: {cell(LOGGED[step][c['name']])}"
        if smooth:
            want += f" · smoothed {smoothed_label(c['name'], step, smooth)}"
        assert c["text"] == want, c
        assert c["rule"] is not None, c["name"]
    return charts


def hover(page: Page, metric: str, step: int) -> None:
    sel = f"figure[data-metric='{metric}'] svg"
    page.locator(sel).scroll_into_view_if_needed()
    at = page.evaluate(POINT_AT, [sel, step])
    page.mouse.move(at["x"], at["y"] + 7)  # beside the line, off its dot


@pytest.fixture(scope="module")
def run_url(base_url) -> str:
    return example_run_url(base_url)


@pytest.mark.parametrize("size", SIZES)
def test_pointing_reads_every_chart_the_keys_move_it_and_smoothing_redraws_in_place(make_context, run_url, size):
    w, h = SIZES[size]
    page = make_context(viewport={"width": w, "height": h}).new_page()
    page.goto(run_url)
    expect(page.locator("#run-readout-hint")).to_be_visible()
    hover(page, "kl", 57)
    charts = expect_read(page, 57)
    kl = page.locator("figure[data-metric='kl']")
    dot_x = float(kl.locator("a.run-dot circle").nth(56).get_attribute("cx"))
    assert next(c["rule"] for c in charts if c["name"] == "kl") == pytest.approx(dot_x, abs=0.01)  # on the point
    assert page.evaluate(OVERLAPS) == [] and page.evaluate(NO_SIDEWAYS_SCROLL)
    shoot(page, SHOTS, "hover-57", size)

    hover(page, "entropy", 115)  # another chart: every chart follows
    expect_read(page, 115)
    page.keyboard.press("Escape")  # the pointer still on the chart: Escape hides it too
    expect(page.locator(".run-readout-layer.is-on")).to_have_count(0)
    hover(page, "entropy", 114)
    expect_read(page, 114)
    page.mouse.move(2, 2)  # off every chart: the readouts say the last step again
    expect(kl.locator(".run-readout")).to_have_text(f"step 120: {cell(LOGGED[120]['kl'])}")
    expect(page.locator(".run-readout-layer.is-on")).to_have_count(0)

    kl.locator("xpath=preceding-sibling::figure[1]").locator("a").last.focus()  # the chart before's last link
    page.keyboard.press("Tab")
    expect(kl.locator("svg")).to_be_focused()
    expect_read(page, 120)  # the step its line said
    page.keyboard.press("ArrowLeft")
    expect_read(page, 119)
    page.keyboard.press("Home")
    expect_read(page, 1)
    page.keyboard.press("ArrowRight")
    expect_read(page, 2)
    expect(page.locator("#announcer")).to_have_text(f"kl: step 2: {cell(LOGGED[2]['kl'])}")
    page.keyboard.press("Escape")
    expect(page.locator(".run-readout-layer.is-on")).to_have_count(0)
    expect(kl.locator(".run-readout")).to_have_text(f"step 120: {cell(LOGGED[120]['kl'])}")
    assert page.url.endswith(run_url)  # the keys moved the readout, not the page

    page.locator("#run-smooth").fill("0.6")
    page.wait_for_url("**smooth=0.6")
    expect(page.locator("polyline.run-line-smooth")).to_have_count(27)
    expect(page.locator("#run-smooth")).to_be_focused()  # the swap kept the control
    hover(page, "reward", 60)
    expect_read(page, 60, smooth=0.6)
    assert page.evaluate(OVERLAPS) == [] and page.evaluate(NO_SIDEWAYS_SCROLL)
    shoot(page, SHOTS, "smooth-0.6", size)

    page.locator("#run-smooth").fill("0.3")  # a weight typed while another is on its way: the last one wins
    page.wait_for_timeout(280)
    page.locator("#run-smooth").fill("0.9")
    page.wait_for_url("**smooth=0.9")
    expect(page.locator("#run-smooth")).to_have_value("0.9")
    hover(page, "kl", 40)
    expect_read(page, 40, smooth=0.9)

    page.locator("#run-smooth").fill("0")
    page.wait_for_url(lambda url: "smooth" not in url)
    expect(page.locator("polyline.run-line-smooth")).to_have_count(0)

    with page.expect_navigation():  # a chart's dot is still its step's link
        page.locator("figure[data-metric='kl'] a.run-dot").nth(59).click()
    assert page.url.endswith("?step=60#selected-step")
    expect(page.locator("figure[data-metric='kl'] .run-readout")).to_have_text(f"step 60: {cell(LOGGED[60]['kl'])}")


def test_without_script_the_smoothing_form_re_renders_the_page(make_context, run_url):
    page = make_context(viewport={"width": 390, "height": 844}, java_script_enabled=False).new_page()
    page.goto(run_url + "?step=60")
    kl = page.locator("figure[data-metric='kl']")
    expect(kl.locator(".run-readout")).to_have_text(f"step 60: {cell(LOGGED[60]['kl'])}")
    assert kl.locator("svg").get_attribute("tabindex") is None  # no dead Tab stop without script
    expect(page.locator("#run-readout-hint")).to_be_hidden()  # nor a hint at what needs script
    page.locator("#run-smooth").fill("0.6")
    page.locator("#run-smooth-form button[type='submit']").click()
    page.wait_for_url("**smooth=0.6**")
    assert "step=60" in page.url
    expect(page.locator("polyline.run-line-smooth")).to_have_count(27)
    expect(kl.locator(".run-readout")).to_have_text(
        f"step 60: {cell(LOGGED[60]['kl'])} · smoothed {smoothed_label('kl', 60, 0.6)}")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    shoot(page, SHOTS, "no-script-smooth", "phone")
