"""app/views/graph_dot.py: the Graphviz dot layout behind every graph the app draws."""
from __future__ import annotations

import itertools
import random
import time

import pytest
from reporting import report

from app.views import graph_detour, graph_dot
from app.views.graph_dot import GraphvizMissing, LayoutCluster, LayoutNode, dot_layout

W, H = 150.0, 60.0


def chain(n, parent=None, prefix="n"):
    return [LayoutNode(f"{prefix}{i}", W, H, parent) for i in range(n)]


def overlap(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def inside(inner, outer):
    return (outer[0] < inner[0] and inner[0] + inner[2] < outer[0] + outer[2]
            and outer[1] < inner[1] and inner[1] + inner[3] < outer[1] + outer[3])


def test_deterministic_and_cached():
    nodes = chain(5)
    edges = [("n0", "n1"), ("n1", "n2"), ("n0", "n3"), ("n3", "n4"), ("n2", "n4")]
    graph_dot.cache_clear()
    first = dot_layout(nodes, [], edges)
    runs = graph_dot.stats()["runs"]
    again = dot_layout(nodes, [], edges)
    assert graph_dot.stats()["runs"] == runs  # the same view: no second dot run
    assert again.seconds == 0.0 and first.seconds > 0
    assert (first.boxes, first.paths) == (again.boxes, again.paths)
    graph_dot.cache_clear()
    fresh = dot_layout(nodes, [], edges)        # and a fresh run gives the same picture
    assert (fresh.boxes, fresh.paths) == (first.boxes, first.paths)


def test_boxes_keep_their_size_and_layers_run_down():
    nodes = [LayoutNode("a", 200, 60, None), LayoutNode("b", 150, 60, None)]
    laid = dot_layout(nodes, [], [("a", "b")])
    a, b = laid.boxes["a"], laid.boxes["b"]
    assert a[2:] == (200, 60) and b[2:] == (150, 60)
    assert a[1] + a[3] < b[1]   # y down: the source above its target
    path = laid.paths[("a", "b")]
    assert path.startswith("M") and " C" in path


def test_clusters_hold_their_members_and_nested_clusters():
    nodes = [LayoutNode("in", W, H, None), LayoutNode("m.a", W, H, "m"), LayoutNode("m.b", W, H, "m"),
             LayoutNode("k.c", W, H, "k"), LayoutNode("out", W, H, None)]
    clusters = [LayoutCluster("m", None, 160, 52), LayoutCluster("k", "m", 120, 52)]
    edges = [("in", "m.a"), ("m.a", "m.b"), ("m.b", "k.c"), ("k.c", "out"), ("in", "k"), ("m", "out")]
    laid = dot_layout(nodes, clusters, edges)
    m, k = laid.boxes["m"], laid.boxes["k"]
    for member in ("m.a", "m.b"):
        assert inside(laid.boxes[member], m)
    assert inside(k, m) and inside(laid.boxes["k.c"], k)
    # the header the cluster's label reserves: members start below it
    assert min(laid.boxes[n][1] for n in ("m.a", "m.b", "k.c")) >= m[1] + 52
    assert not overlap(laid.boxes["in"], m) and not overlap(laid.boxes["out"], m)
    assert set(laid.paths) == set(edges)   # edges to a cluster are routed too (lhead/ltail)


def test_cycles_and_isolated_nodes_are_laid_out():
    nodes = chain(4) + [LayoutNode("alone", W, H, None)]
    edges = [("n0", "n1"), ("n1", "n2"), ("n2", "n0"), ("n2", "n3"), ("n3", "n1")]
    laid = dot_layout(nodes, [], edges)
    assert set(laid.boxes) == {n.id for n in nodes}
    assert all(laid.paths[e].startswith("M") for e in edges)
    for a, b in itertools.combinations(laid.boxes.values(), 2):
        assert not overlap(a, b)


def test_an_empty_graph_and_awkward_ids():
    assert dot_layout([], [], []).boxes == {}
    odd = ['<script>"x"</script>', "a;b", "graph", "->", "cluster_x", "ü"]
    nodes = [LayoutNode(i, W, H, None) for i in odd]
    laid = dot_layout(nodes, [], list(zip(odd, odd[1:], strict=False)))
    assert set(laid.boxes) == set(odd)   # dot only ever sees n0, n1, ...


def test_two_hundred_nodes_lay_out_in_bounded_time(request):
    rng = random.Random(20)
    nodes = chain(200)
    edges = sorted({(f"n{i}", f"n{j}") for i in range(199)
                    for j in rng.sample(range(i + 1, 200), min(2, 199 - i))})
    graph_dot.cache_clear()
    start = time.perf_counter()
    laid = dot_layout(nodes, [], edges)
    seconds = time.perf_counter() - start
    report(request, f"graph_dot: 200 nodes, {len(edges)} edges laid out by dot in {seconds * 1000:.0f} ms")
    assert len(laid.boxes) == 200 and len(laid.paths) == len(edges)


def test_a_missing_dot_is_said_at_start_up(monkeypatch):
    monkeypatch.setattr(graph_dot.shutil, "which", lambda name: None)
    with pytest.raises(GraphvizMissing, match=r"apt-get install graphviz"):
        graph_dot.require_dot()


def test_a_spline_cutting_a_box_corner_is_bent_round_it():
    box = (100.0, 100.0, 100.0, 100.0)
    path = "M50 50 C150 50 250 150 250 250"   # cuts through the box's upper right
    bent = graph_detour.detour(path, [box])
    assert bent != path and bent.startswith("M50 50") and bent.endswith("250 250")
    segs = bent.split(" C")[1:]
    assert len(segs) >= 2
    assert graph_detour.detour("M0 0 C10 0 20 0 30 0", [box]) == "M0 0 C10 0 20 0 30 0"  # nothing in the way


def test_concentrated_splines_become_subpaths():
    pos = "e,10,0 10,40 10,30 10,20 10,10;s,0,60 0,60 0,50 0,45 0,40"
    path = graph_dot._spline_path(pos, 100.0)
    assert path.count("M") == 2 and path.startswith("M10 60")
