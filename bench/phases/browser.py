"""What a user sees, in headless Debian Chromium: DOMContentLoaded and graph visible on a
first load of `/`, and the time from a click on "next step" to the new step painted.

A fresh browser context per load, so every load starts with an empty HTTP cache; one
warm-up load first, because the first context also pays the browser's own start-up.
Timings are read in the page (Navigation Timing, performance.now()), not from
Playwright's side, so the round trips of the driver are not in them.
"""
from __future__ import annotations

import json

from bench.common import HOST, median

# No sandbox (the bench may run as root) and no GPU; Chromium's own background traffic
# (updates, sync) off, so only the page's requests compete for the machine.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

# (Predicates are functions, not expression strings: the app's CSP forbids eval.)
# Installed before the page's own scripts: the first animation frame in which
# svg#graph has a box and is visible (rAF runs just before that frame paints).
def visible_watch(selector: str, key: str) -> str:
    """A script installed before the page's own: window.__bench[key] is the time of the first animation
    frame in which `selector` has a box and is visible (rAF runs just before that frame paints), and
    window.__bench.fcp the first contentful paint."""
    return """
(() => {
  const b = window.__bench = {};
  function check() {
    const el = document.querySelector(SELECTOR);
    if (el) {
      const r = el.getBoundingClientRect();
      const shown = !el.checkVisibility || el.checkVisibility({visibilityProperty: true, opacityProperty: true});
      if (r.width > 0 && r.height > 0 && shown) { b[KEY] = performance.now(); return; }
    }
    requestAnimationFrame(check);
  }
  requestAnimationFrame(check);
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (e.name === 'first-contentful-paint') b.fcp = e.startTime;
    }).observe({type: 'paint', buffered: true});
  } catch (e) {}
})();
""".replace("SELECTOR", json.dumps(selector)).replace("KEY", json.dumps(key))


GRAPH_WATCH = visible_watch("svg#graph", "graphVisible")

NAV_TIMING = """
() => {
  const n = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return {
    dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, ttfb: n.responseStart,
    graphVisible: window.__bench.graphVisible, fcp: window.__bench.fcp === undefined ? null : window.__bench.fcp,
    bytes: n.transferSize + res.reduce((s, r) => s + r.transferSize, 0),
    bodyBytes: n.encodedBodySize + res.reduce((s, r) => s + r.encodedBodySize, 0),
    resources: res.map(r => ({name: r.name, transferSize: r.transferSize, encodedBodySize: r.encodedBodySize,
                              decodedBodySize: r.decodedBodySize, duration: r.duration})),
  };
}
"""

# Armed before each click: click time (capture phase, before htmx sees it) and
# the first frame after the new step's view (step id + title) is in the DOM.
ARM_STEP_CHANGE = """
() => {
  const view = () => document.querySelector('.view-content');
  const s = window.__step = {before: view() && view().dataset.stepId};
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#next-step')) s.clicked = performance.now();
  }, {capture: true, once: true});
  const obs = new MutationObserver(() => {
    const v = view(), h = document.querySelector('#step-title');
    if (v && h && h.textContent.trim() && v.dataset.stepId !== s.before && s.inPlace === undefined) {
      s.inPlace = performance.now(); s.stepId = v.dataset.stepId; s.title = h.textContent.trim();
      obs.disconnect();
      requestAnimationFrame(() => { s.painted = performance.now(); s.done = true; });
    }
  });
  obs.observe(document.body, {childList: true, subtree: true, characterData: true, attributes: true});
}
"""

# The page measured: the walkthrough's opening step, which `/` served until the start page
# (issue 20) took its place; the figures stay comparable with earlier runs.
STEP_PAGE = "/walkthroughs/toy_grpo/steps/advantages"


def browser_phase(port: int, args, figures: dict, details: dict) -> None:
    # Imported here: only this phase needs Playwright, and the pure functions must load without it.
    from playwright.sync_api import sync_playwright

    base = f"http://{HOST}:{port}"
    loads, changes = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            details["chromium"] = browser.version
            # Warm-up load: the first context pays the browser's own start-up.
            for i in range(args.page_loads + 1):
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})  # empty HTTP cache: a first load
                ctx.add_init_script(GRAPH_WATCH)
                page = ctx.new_page()
                page.goto(base + STEP_PAGE, wait_until="load")
                try:
                    page.wait_for_function("() => window.__bench && window.__bench.graphVisible !== undefined",
                                           timeout=15_000)
                except Exception as exc:
                    state = page.evaluate("""() => { const el = document.querySelector('svg#graph');
                        const r = el && el.getBoundingClientRect();
                        return {bench: window.__bench || null, graph: !!el, w: r && r.width, h: r && r.height,
                                visibility: document.visibilityState, ready: document.readyState}; }""")
                    raise RuntimeError(f"svg#graph never became visible on {STEP_PAGE}: {state}") from exc
                timing = page.evaluate(NAV_TIMING)
                ctx.close()
                if i > 0:
                    loads.append(timing)
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(base + STEP_PAGE, wait_until="load")
            while len(changes) < args.step_changes:
                # the last step's Next leaves the walkthrough (a plain link, no htmx swap): start over
                if page.locator("#next-step[hx-get]").count() == 0:
                    page.goto(base + STEP_PAGE, wait_until="load")
                page.evaluate(ARM_STEP_CHANGE)
                page.click("#next-step[hx-get]")
                page.wait_for_function("() => window.__step && window.__step.done === true", timeout=15_000)
                s = page.evaluate("() => window.__step")
                changes.append({"step": s["stepId"], "title": s["title"], "in_place_ms": s["inPlace"] - s["clicked"],
                                "painted_ms": s["painted"] - s["clicked"]})
            ctx.close()
        finally:
            browser.close()
    figures["dcl_ms"] = median([t["dcl"] for t in loads])
    # The frame in which the graph first has a visible box; it is on screen once that
    # frame is presented, which for a server-rendered graph is no earlier than FCP.
    figures["graph_visible_ms"] = median([max(t["graphVisible"], t["fcp"] or 0) for t in loads])
    figures["first_load_browser_bytes"] = median([t["bytes"] for t in loads])
    figures["step_change_ms"] = median([c["painted_ms"] for c in changes])
    details["page_loads"] = [{k: v for k, v in t.items() if k != "resources"} for t in loads]
    details["page_load_resources"] = loads[-1]["resources"] if loads else []
    details["step_changes"] = changes
    details["step_change_in_place_ms"] = median([c["in_place_ms"] for c in changes])
    details["fcp_ms"] = median([t["fcp"] for t in loads if t["fcp"] is not None])
    details["graph_in_layout_ms"] = median([t["graphVisible"] for t in loads])
