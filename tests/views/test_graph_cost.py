"""Drawing costs what is drawn, not what the coordinates say.

Since issue 20 dot lays every view out, so the file's positions no longer place boxes; a
file whose positions are flung to the limits must still draw, and as cheaply.

Edges used to be tested against boxes by sampling a point every 20 units along them, so one
node at x = -1e8 cost 13.7 s and ~700 MB to draw; at -1e9 it ran out of memory. The test is
now an exact segment-rectangle intersection (Liang-Barsky, app/views/graph_layout._clip).
Positions are bounded by the loader (limits.MAX_POSITION = 1e6), and even at that bound a
page's graph costs milliseconds and kilobytes.
"""
from __future__ import annotations

import copy
import pathlib
import time
import tracemalloc
import xml.etree.ElementTree as ET
from fractions import Fraction

import jinja2
from hostile import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from reporting import report
from snapshots import seed_dict

from app.domain.snapshot import parse_snapshot
from app.domain.snapshot.limits import MAX_POSITION
from app.views.graph import build_graph_view
from app.views.graph_layout import _clip, _crosses

ROOT = pathlib.Path(__file__).resolve().parents[2]


def far_snapshot():
    """The seed with its top-level nodes flung to the corners of the allowed world."""
    doc = seed_dict()
    corners = [(-MAX_POSITION, -MAX_POSITION), (MAX_POSITION, MAX_POSITION), (MAX_POSITION, -MAX_POSITION),
               (-MAX_POSITION, MAX_POSITION), (-MAX_POSITION, 0.0), (MAX_POSITION, 0.0)]
    top = [n["node_id"] for n in doc["document"]["semantic"]["nodes"] if not n["metadata"].get("parentId")]
    far = {nid: {"x": corners[i % len(corners)][0], "y": corners[i % len(corners)][1]} for i, nid in enumerate(top)}
    doc["document"]["view"]["node_positions"].update(copy.deepcopy(far))
    for step in doc["collaboration"]["walkthrough"]["steps"] + doc["collaboration"]["savedViews"]:
        step["view"]["nodePositions"].update(copy.deepcopy(far))
    return parse_snapshot(doc)


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "templates")), autoescape=True)


def draw(snap, expanded):
    """The graph view model and its SVG, as a page draws them."""
    graph = build_graph_view(snap, expanded, [])
    html = ENV.get_template("partials/graph.html").render(
        graph=graph, toggle_url=lambda m: f"/w?toggle={m}", select_url=lambda n: f"/w?node={n}", name=snap.name)
    ET.fromstring(html)
    return graph


def test_a_far_flung_graph_draws_in_milliseconds_and_kilobytes(request):
    snap = far_snapshot()
    every_module = [m.node_id for m in snap.modules]
    for expanded in ([], every_module):
        draw(snap, expanded)  # warm the template cache and the snapshot's cached lookups
        start = time.perf_counter()
        graph = draw(snap, expanded)
        seconds = time.perf_counter() - start
        tracemalloc.start()
        try:
            draw(snap, expanded)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        report(request, f"test_graph_cost: nodes at ±{MAX_POSITION:g}, {len(graph.nodes)} boxes, "
                        f"{len(graph.edges)} edges: {seconds * 1000:.1f} ms, tracemalloc peak {peak / 1e6:.2f} MB")
        # the flung positions are the author's layout, which dot replaces: the boxes stay near
        assert graph.edges and all(abs(n.x) < 1e4 and abs(n.y) < 1e4 for n in graph.nodes)
        # generous: shared, noisy machines; the old sampling took seconds and hundreds of MB here
        assert seconds < 2.0 and peak < 50e6


# -- the exact test against independent ones ----------------------------------------

SMALL = st.integers(-60, 60)


def exact_crosses(a, b, box) -> bool:
    """Rational arithmetic, by axis: the t in (0, 1) where a + t(b - a) lies in the closed box."""
    low, high = Fraction(0), Fraction(1)
    for start, delta, lo, size in ((a[0], b[0] - a[0], box[0], box[2]), (a[1], b[1] - a[1], box[1], box[3])):
        if delta == 0:
            if not lo <= start <= lo + size:
                return False
            continue
        t1, t2 = sorted((Fraction(lo - start, delta), Fraction(lo + size - start, delta)))
        low, high = max(low, t1), min(high, t2)
    # a non-empty closed interval that reaches inside the open (0, 1)
    return low <= high and high > 0 and low < 1


def sampled_hits(a, b, box, n=1000) -> list[int]:
    """Brute force: the i of points i/n of the way (ends excluded) inside the box, exactly
    (integer inputs, everything scaled by n)."""
    x0, y0, dx, dy = a[0] * n, a[1] * n, b[0] - a[0], b[1] - a[1]
    left, top, right, bottom = box[0] * n, box[1] * n, (box[0] + box[2]) * n, (box[1] + box[3]) * n
    return [i for i in range(1, n) if left <= x0 + dx * i <= right and top <= y0 + dy * i <= bottom]


@fuzz_settings(400)
@given(a=st.tuples(SMALL, SMALL), b=st.tuples(SMALL, SMALL),
       box=st.tuples(SMALL, SMALL, st.integers(0, 40), st.integers(0, 40)))
def test_exact_intersection_agrees_with_dense_sampling(a, b, box):
    crosses = _crosses(a, b, [box])
    assert crosses == exact_crosses(a, b, box)
    hits = sampled_hits(a, b, box)
    if hits:  # a sampled point inside: the exact test sees it
        assert crosses
    part = _clip(a, b, box)
    if crosses:
        assert part is not None
        inside = min(part[1], 1.0) - max(part[0], 0.0)
        if inside > 2 / 1000:  # a stretch longer than the sampling step holds a sample
            assert hits


@fuzz_settings(200)
@given(a=st.tuples(SMALL, SMALL), b=st.tuples(SMALL, SMALL),
       boxes=st.lists(st.tuples(SMALL, SMALL, st.integers(0, 40), st.integers(0, 40)), max_size=6))
def test_crossing_any_box_is_crossing_one_of_them(a, b, boxes):
    assert _crosses(a, b, boxes) == any(exact_crosses(a, b, box) for box in boxes)


def test_a_segment_only_touching_at_its_ends_does_not_cross():
    box = (0, 0, 10, 10)
    assert not _crosses((10, 5), (30, 5), [box])      # starts on the right side
    assert not _crosses((-20, 5), (0, 5), [box])      # ends on the left side
    assert _crosses((-20, 5), (30, 5), [box])         # runs through
    assert _crosses((-20, 0), (30, 0), [box])         # runs along the top edge
    assert not _crosses((-20, -1), (30, -1), [box])   # passes just above
    assert _crosses((-10, 0), (0, -10), [(-5, -5, 0, 0)])  # a zero-size box on the line


def test_cost_does_not_grow_with_length():
    """A 20-million-unit edge past a box: the old sampling built a million points (~100 MB)."""
    box = (0.0, 0.0, 150.0, 60.0)
    tracemalloc.start()
    try:
        for far in (1e3, 1e6, 1e7):
            assert _crosses((-far, 30.0), (far, 30.0), [box])
            assert not _crosses((-far, 100.0), (far, 100.0), [box])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1e6
