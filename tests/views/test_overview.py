"""The overview (every module closed, laid out by dot; ViewState.overview) and the screen's graph notes."""
from __future__ import annotations

import itertools
import pathlib

import pytest
from snapshots import other_snapshot

from app.domain.snapshot import load_snapshot, parse_snapshot
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step_inputs import obtain
from app.kinds.toy.views.screen import build_screen
from app.kinds.toy.views.url_state import parse_view, view_for_step
from app.views.graph import build_graph_view
from app.views.graph_layout import edge_box_crossings

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"


@pytest.fixture(scope="module")
def seed():
    return load_snapshot(SEED)


def overview(seed):
    state = parse_view(seed, "toy_grpo", "clip", expanded=None, node=None, params=GRPOParams(), view="overview")
    return build_screen(seed, state, obtain(state.own.params, "cpu", None)).graph


def test_every_top_level_node_is_placed_once_without_overlap(seed):
    graph = overview(seed)
    assert [n.id for n in graph.nodes] == [n.node_id for n in seed.nodes if n.parent_id is None]
    for a, b in itertools.combinations(graph.nodes, 2):
        apart = a.x + a.width <= b.x or b.x + b.width <= a.x or a.y + a.height <= b.y or b.y + b.height <= a.y
        assert apart, (a.id, b.id)


def test_edges_run_down_the_layers(seed):
    graph = overview(seed)
    for e in graph.edges:
        assert graph.node(e.source).y < graph.node(e.target).y, e.id
    # the seed's one long row (3,210 units) becomes six layers: input, the three policies,
    # ratio and divergence, clipped, the objective, the loss (dot puts advantages where its
    # edges are shortest, next to ratio); close to square
    rows = sorted({n.y for n in graph.nodes})
    assert len(rows) == 6
    assert {"policy", "old_policy", "reference_policy"} <= {n.id for n in graph.nodes if n.y == rows[1]}
    assert rows[0] < graph.node("advantages").y < graph.node("clipped").y
    x0, y0, x1, y1 = graph.bounds
    assert x1 - x0 <= 900 and y1 - y0 <= 800, graph.bounds
    assert edge_box_crossings(seed, graph.edges, {n.id: (n.x, n.y, n.width, n.height) for n in graph.nodes}) == []


def on_border(box, x, y, tol=2.0):
    inside = box.x - tol <= x <= box.x + box.width + tol and box.y - tol <= y <= box.y + box.height + tol
    near = min(abs(x - box.x), abs(x - box.x - box.width), abs(y - box.y), abs(y - box.y - box.height)) <= tol
    return inside and near


def test_overview_edges_run_from_border_to_border_entering_from_above(seed):
    graph = overview(seed)
    for e in graph.edges:
        src, dst = graph.node(e.source), graph.node(e.target)
        numbers = [float(v) for v in e.path.replace("M", " ").replace("C", " ").replace("L", " ").split()]
        (x0, y0), (x1, y1) = numbers[:2], numbers[-2:]
        assert on_border(src, x0, y0) and on_border(dst, x1, y1), e.id
        assert y1 <= dst.y + dst.height / 2, e.id   # the arrow comes down the layers into its target


def test_a_cycle_is_laid_out_too():
    doc = other_snapshot()
    doc["document"]["semantic"]["edges"].append(
        {"edge_id": "back", "source_node_id": "sink", "target_node_id": "src"})
    snap = parse_snapshot(doc)
    graph = build_graph_view(snap, [], [])
    assert {n.id for n in graph.nodes} == {"src", "block<b>", "sink"}
    assert any(e.id == "sink->src" and e.path.startswith("M") for e in graph.edges)


def test_overview_is_url_state_and_leaves_on_selection(seed):
    state = parse_view(seed, "toy_grpo", "clip", expanded=None, node=None, params=GRPOParams(), view="overview")
    assert state.overview and state.query(seed)["view"] == "overview"
    assert "view=overview" in state.url(seed)
    back = state.toggling_overview()
    assert not back.overview and "view" not in back.query(seed)
    picked = state.selecting("ratio")
    assert not picked.overview and picked.node == "ratio"
    # another step opens at its own saved view, not the overview
    assert not state.at_step(seed, "policy").overview
    # anything else in ?view= is not the overview (the page redirects it away)
    other = parse_view(seed, "toy_grpo", "clip", expanded=None, node=None, params=GRPOParams(), view="x")
    assert not other.overview


def test_overview_screen_collapses_every_module_and_fits_all(seed):
    state = parse_view(seed, "toy_grpo", "policy", expanded=None, node=None, params=GRPOParams(), view="overview")
    screen = build_screen(seed, state, obtain(state.own.params, "cpu", None))
    assert screen.graph.fit_all
    assert {n.id for n in screen.graph.nodes} == {n.node_id for n in seed.nodes if n.parent_id is None}
    assert not any(n.expanded for n in screen.graph.nodes)
    step = build_screen(seed, state.toggling_overview(), obtain(state.own.params, "cpu", None))
    assert not step.graph.fit_all and "policy.logits" in {n.id for n in step.graph.nodes}


def test_rewards_are_annotated_on_the_advantages_node(seed):
    state = view_for_step(seed, "toy_grpo", "advantages", GRPOParams(rewards="1,0,0,1,0,1,0,0"))
    screen = build_screen(seed, state, obtain(state.own.params, "cpu", None))
    note = screen.annotations["advantages"]
    rewards = [s["reward"] for s in screen.result.samples]
    assert rewards == [1, 0, 0, 1, 0, 1, 0, 0]
    assert note.label == "rewards r of the 8 completions"   # no values: the figure shows (and changes) them
    assert "8 completions, r = 1, 0, 0, 1, 0, 1, 0, 0" in note.detail
    assert set(screen.annotations) == {"advantages"}   # a note, not a new node
    assert "rewards" not in {n.id for n in screen.graph.nodes}


def test_a_module_without_members_has_no_toggle(seed):
    state = view_for_step(seed, "toy_grpo", "advantages", GRPOParams())
    graph = build_screen(seed, state, obtain(state.own.params, "cpu", None)).graph
    assert graph.node("advantages").is_module and not graph.node("advantages").has_toggle
    assert graph.node("policy").has_toggle
