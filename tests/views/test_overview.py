"""The overview (app/views/overview_layout.py, ViewState.overview) and the screen's graph notes."""
from __future__ import annotations

import itertools
import pathlib

import pytest
from snapshots import other_snapshot

from app.domain.snapshot import load_snapshot, parse_snapshot
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.views.screen import build_screen
from app.kinds.toy.views.view_state import parse_view, view_for_step
from app.views.graph_layout import NODE_HEIGHT, NODE_WIDTH
from app.views.overview_layout import overview_positions, top_level_graph

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"


@pytest.fixture(scope="module")
def seed():
    return load_snapshot(SEED)


def boxes(positions):
    return {n: (p["x"], p["y"], p["x"] + NODE_WIDTH, p["y"] + NODE_HEIGHT) for n, p in positions.items()}


def test_every_top_level_node_is_placed_once_without_overlap(seed):
    positions = overview_positions(seed)
    assert set(positions) == {n.node_id for n in seed.nodes if n.parent_id is None}
    for (a, ba), (b, bb) in itertools.combinations(boxes(positions).items(), 2):
        apart = ba[2] <= bb[0] or bb[2] <= ba[0] or ba[3] <= bb[1] or bb[3] <= ba[1]
        assert apart, (a, b)


def test_edges_run_down_the_layers(seed):
    positions = overview_positions(seed)
    for s, t in top_level_graph(seed).edges:
        assert positions[s]["y"] < positions[t]["y"], (s, t)
    # the seed's one long row (3,210 units) becomes six layers: input, the three policies and
    # advantages, ratio and divergence, clipped, the objective, the loss; close to square
    rows = sorted({p["y"] for p in positions.values()})
    assert len(rows) == 6
    assert {n for n, p in positions.items() if p["y"] == rows[1]} == \
        {"policy", "old_policy", "reference_policy", "advantages"}
    b = boxes(positions).values()
    width, height = max(x[2] for x in b) - min(x[0] for x in b), max(x[3] for x in b) - min(x[1] for x in b)
    assert width <= 720 and height <= 720, (width, height)


def test_overview_edges_leave_the_bottom_and_enter_the_top(seed):
    state = parse_view(seed, "toy_grpo", "clip", expanded=None, node=None, params=GRPOParams(), view="overview")
    graph = build_screen(seed, state, "cpu").graph
    for e in graph.edges:
        src, dst = graph.node(e.source), graph.node(e.target)
        start, end = e.path.split(" C")[0], e.path.split(" ")[-2:]
        assert start == f"M{src.x + src.width / 2:g} {src.y + src.height:g}", e.id
        assert end == [f"{dst.x + dst.width / 2:g}", f"{dst.y:g}"], e.id


def test_a_cycle_is_laid_out_too():
    doc = other_snapshot()
    doc["document"]["semantic"]["edges"].append(
        {"edge_id": "back", "source_node_id": "sink", "target_node_id": "src"})
    snap = parse_snapshot(doc)
    positions = overview_positions(snap)
    assert set(positions) == {"src", "block<b>", "sink"}


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
    screen = build_screen(seed, state, "cpu")
    assert screen.graph.fit_all
    assert {n.id for n in screen.graph.nodes} == {n.node_id for n in seed.nodes if n.parent_id is None}
    assert not any(n.expanded for n in screen.graph.nodes)
    step = build_screen(seed, state.toggling_overview(), "cpu")
    assert not step.graph.fit_all and "policy.logits" in {n.id for n in step.graph.nodes}


def test_rewards_are_annotated_on_the_advantages_node(seed):
    state = view_for_step(seed, "toy_grpo", "advantages", GRPOParams(rewards="1,0,0,1,0,1,0,0"))
    screen = build_screen(seed, state, "cpu")
    note = screen.annotations["advantages"]
    rewards = [s["reward"] for s in screen.result.samples]
    assert rewards == [1, 0, 0, 1, 0, 1, 0, 0]
    assert note.label == "rewards r = 1, 0, 0, 1, 0, 1, 0, 0"
    assert "8 completions" in note.detail
    assert set(screen.annotations) == {"advantages"}   # a note, not a new node
    assert "rewards" not in {n.id for n in screen.graph.nodes}


def test_a_module_without_members_has_no_toggle(seed):
    state = view_for_step(seed, "toy_grpo", "advantages", GRPOParams())
    graph = build_screen(seed, state, "cpu").graph
    assert graph.node("advantages").is_module and not graph.node("advantages").has_toggle
    assert graph.node("policy").has_toggle
