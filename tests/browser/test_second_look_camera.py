"""Issue 49 (item 8): the fitted camera of every step of the three walkthroughs (the toy's 4, the tiny
LM's 7, the real model's 6) at 390x844, 1280x720 and 1920x1080 shows every node the step names whole,
and cuts no node at the frame's edge.

- Named nodes, as rendered: each selected node's box lies wholly inside the graph's frame; each open
  module the step names (an expanded container) has its title block (its name, id and shape lines and
  its ±, as drawn) wholly inside the frame, or, where that title is too far from the step's node to share a phone's
  frame (app/views/graph.py far_titles), its name in the frame's title strip, which lies inside the frame.
- No node box, open module's title block or note lies across the frame's edge (the visible frame is
  below the title strip where there is one), unless the camera could leave none whole and faded it
  whole (data-cut, static/js/camera.js markCuts): and that only on a phone, never a named node.

The real model's pages draw their graph without a computed step; no step is run here.
"""
from __future__ import annotations

import pytest
from browser_helpers import wait_settled

pytestmark = pytest.mark.browser

SIZES = {"390x844": (390, 844), "1280x720": (1280, 720), "1920x1080": (1920, 1080)}
STEPS = {
    "toy_grpo": ("policy", "advantages", "clip", "reference"),
    "tiny_lm_grpo": ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update"),
    "smollm_grpo": ("sample", "advantages", "ratio", "blocks", "attention", "update"),
}

# Boxes in world units mapped to the screen through the camera's matrix; the frame is its inner box
# (less its border) below the title strip. Returns the named nodes not shown, the boxes cut, faded ones.
MEASURE = """() => {
  const frame = document.querySelector('.graph-frame'), o = frame.getBoundingClientRect();
  const f = {left: o.left + frame.clientLeft, top: o.top + frame.clientTop};
  f.right = f.left + frame.clientWidth; f.bottom = f.top + frame.clientHeight;
  const strip = frame.querySelector('.graph-titles');
  const s = strip && strip.getBoundingClientRect();
  const stripIn = !!s && s.left >= o.left && s.right <= o.right && s.top >= o.top && s.bottom <= o.bottom;
  if (s) f.top = Math.max(f.top, s.bottom);
  const M = document.getElementById('camera').getScreenCTM();
  const screen = b => { const a = new DOMPoint(b.x, b.y).matrixTransform(M), c = new DOMPoint(b.x + b.width, b.y + b.height).matrixTransform(M);
                        return {left: a.x, top: a.y, right: c.x, bottom: c.y}; };
  const rect = el => ({x: +el.getAttribute('x'), y: +el.getAttribute('y'), width: +el.getAttribute('width'), height: +el.getAttribute('height')});
  // an open module's title block as drawn: its name, id and shape lines and its ± (world units)
  const header = g => { let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    g.querySelectorAll(':scope > a.node-link > text, :scope > text, :scope > a.toggle-link > rect').forEach(t => {
      const b = t.getBBox(); if (!b.width) return;
      x0 = Math.min(x0, b.x); y0 = Math.min(y0, b.y); x1 = Math.max(x1, b.x + b.width); y1 = Math.max(y1, b.y + b.height); });
    return {x: x0, y: y0, width: x1 - x0, height: y1 - y0}; };
  const T = 0.5;
  const inside = r => r.left >= f.left - T && r.right <= f.right + T && r.top >= f.top - T && r.bottom <= f.bottom + T;
  const outside = r => r.right <= f.left + T || r.left >= f.right - T || r.bottom <= f.top + T || r.top >= f.bottom - T;
  const out = {notShown: [], cut: [], faded: [], named: 0, strip: strip ? strip.textContent.replace(/\\s+/g, ' ').trim() : ''};
  document.querySelectorAll('#graph .node').forEach(g => {
    const id = g.getAttribute('data-node-id'), container = g.classList.contains('container');
    const own = container ? header(g) : rect(g.querySelector(':scope > rect'));
    if (g.classList.contains('selected') || g.classList.contains('expanded')) {
      out.named++;
      const whole = screen(g.classList.contains('selected') ? rect(g.querySelector(':scope > rect')) : own);
      const named = !container || g.classList.contains('selected') ? false
        : stripIn && !!strip.querySelector('[data-group="' + CSS.escape(id) + '"]');
      if (!inside(whole) && !named) out.notShown.push(id);
    }
    const r = screen(own);
    if (!inside(r) && !outside(r)) (g.hasAttribute('data-cut') ? out.faded : out.cut).push(id + (container ? ' (title)' : ''));
  });
  document.querySelectorAll('#graph .notes [data-note-for]').forEach(n => {
    const r = screen(rect(n.querySelector('rect')));
    if (!inside(r) && !outside(r)) (n.hasAttribute('data-cut') ? out.faded : out.cut).push('note on ' + n.getAttribute('data-note-for'));
  });
  return out;
}"""


def settle(page) -> None:
    wait_settled(page)
    page.wait_for_function("() => { const f = document.querySelector('.graph-frame');"
                           " return f.getAttribute('data-fitted-for') === f.clientWidth + 'x' + f.clientHeight; }")


@pytest.fixture(scope="module")
def base_url(repo_base_url) -> str:
    return repo_base_url


@pytest.mark.parametrize("size", list(SIZES))
def test_every_step_frames_what_it_names_and_cuts_no_node(make_context, shot, size):
    width, height = SIZES[size]
    page = make_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(60_000)
    failures, report = [], []
    for walkthrough, steps in STEPS.items():
        for step in steps:
            page.goto(f"/walkthroughs/{walkthrough}/steps/{step}")
            settle(page)
            m = page.evaluate(MEASURE)
            where = f"{size} {walkthrough}/{step}"
            report.append(f"{where:<40} named {m['named']}  faded {m['faded']}  strip {m['strip']!r}")
            if not m["named"]:
                failures.append(f"{where}: no named node drawn")
            if m["notShown"]:
                failures.append(f"{where}: named nodes not shown whole, nor named in the frame: {m['notShown']}")
            if m["cut"]:
                failures.append(f"{where}: boxes cut by the frame's edge: {m['cut']}")
            if m["faded"] and width > 600:
                failures.append(f"{where}: boxes faded (cut) on a frame that is not a phone's: {m['faded']}")
            if size == "1280x720" and walkthrough == "toy_grpo" or size == "390x844" and step in ("sample", "attention"):
                shot(page, f"{walkthrough}-{step}")
    print("\n".join(report))
    assert not failures, "\n".join(failures)
