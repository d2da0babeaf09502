"""Compare mode's URL state (views/url_state.py), view model (compare_view.py) and graph marker
(compare_marks.py), without the web layer."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from snapshots import SEED_PATH

from app.domain.snapshot import load_snapshot
from app.engine.grpo.params import Conventions
from app.kinds.toy.engine.compare import GradChange
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step_inputs import obtain
from app.kinds.toy.views.compare_cases import CASES
from app.kinds.toy.views.compare_marks import change_detail, change_tag, grad_marks, percent
from app.kinds.toy.views.compare_view import build_compare_view
from app.kinds.toy.views.screen import build_screen
from app.kinds.toy.views.url_state import COMPARE_KEYS, parse_compare, parse_view
from app.views.graph_layout import crosses_any
from app.views.urls import conventions_query

SEED = load_snapshot(SEED_PATH)
WID = "toy_grpo"


def state(step="clip", compare=None, params=None, node=None):
    return parse_view(SEED, WID, step, expanded=None, node=node, params=params or GRPOParams(),
                           compare=compare)


def view(query: dict, step="clip", node=None, params=None):
    request = parse_compare(query)
    s = state(step, request.conventions, params, node)
    inputs = obtain(s.own.params, "cpu", None, compare=s.own.compare if request.on else None)
    screen = build_screen(SEED, s, inputs)
    return screen, build_compare_view(screen, request, inputs)


# -- URL state --------------------------------------------------------------------------

def test_compare_mode_is_on_with_any_vs_key():
    assert not parse_compare({"seed": "3"}).on
    assert parse_compare({"vs_beta": ""}).on  # an empty form field: the preset's value
    assert parse_compare({"vs_beta": ""}).conventions == Conventions()
    assert parse_compare({"vs_preset": "trl", "vs_beta": "0.04"}).conventions == Conventions(preset="trl", beta=0.04)
    assert parse_compare({"vs_preset": "verl", "vs_dual_clip": "none"}).conventions.dual_clip is None
    assert COMPARE_KEYS[0] == "vs_preset" and "vs_seed" not in COMPARE_KEYS


@pytest.mark.parametrize("query, key", [
    ({"vs_beta": "11"}, "vs_beta"), ({"vs_beta": "x"}, "vs_beta"), ({"vs_preset": "nope"}, "vs_preset"),
    ({"vs_kl_placement": "reward", "vs_kl_bias_correction": "true"}, "vs_kl_bias_correction"),
    ({"vs_rewards": "1,1"}, "vs_rewards"), ({"vs_max_length": "0"}, "vs_max_length"),
])
def test_refusals_are_named_by_vs_key(query, key):
    request = parse_compare(query)
    assert request.on and request.conventions is None and key in request.errors
    assert request.validation_errors()[0]["loc"] == ("query", key)


@pytest.mark.parametrize("conventions", [
    Conventions(), Conventions(preset="trl"), Conventions(preset="verl", dual_clip=None, beta=0.5),
    Conventions(preset="dapo", clip_epsilon=0.1), Conventions(kl_bias_correction=True, kl_estimator="k1"),
])
def test_side_b_round_trips_through_the_url(conventions):
    query = conventions_query(conventions)
    assert query["vs_preset"] == conventions.preset  # always there: Compare mode shows in the URL
    assert parse_compare(query).conventions == conventions


def test_view_state_keeps_compare_mode_everywhere():
    trl = Conventions(preset="trl")
    s = state(compare=trl)
    assert s.query(SEED)["vs_preset"] == "trl"
    for moved in (s.selecting("ratio"), s.toggled("clipped"), s.at_step(SEED, "reference"), s.toggling_overview()):
        assert moved.own.compare == trl and "vs_preset=trl" in moved.url(SEED)
    assert "vs_" not in s.with_own(compare=None).url(SEED)


# -- the graph marker ---------------------------------------------------------------------

def test_marker_tags_and_words():
    assert change_tag(GradChange(1.0, 1.5, 0.42, 0.42)) == "∇ 42%"
    assert change_tag(GradChange(0.0, 0.2, 0.2, None)) == "∇ new"
    assert change_tag(GradChange(1.0, 1.0, 0.0, 0.0)) == "∇ 0%"
    assert percent(0.0654) == "6.5%" and percent(2.5) == "250%" and percent(1e-5) == "<0.1%"
    assert "only" not in change_detail(GradChange(1.0, 0.0, 1.0, 1.0)) and \
        "B sends no gradient" in change_detail(GradChange(1.0, 0.0, 1.0, 1.0))
    assert "no finite size" in change_detail(GradChange(0.0, 0.2, 0.2, None))


def test_marker_size_grows_with_the_change_and_sits_beside_its_node_off_every_edge():
    screen = build_screen(SEED, state(), obtain(GRPOParams(), "cpu", None))
    changes = {"ratio": GradChange(1, 1, 0.25, 0.25), "clipped": GradChange(0, 1, 1, None),
               "python@clipped#0": GradChange(1, 3, 3, 3.0), "output": None}
    marks = grad_marks(screen.graph, changes)
    assert set(marks) == {"ratio", "clipped", "python@clipped#0"}  # nothing where neither side has a gradient
    ratio, clipped, member = marks["ratio"], marks["clipped"], marks["python@clipped#0"]
    assert ratio.fill_width == pytest.approx(ratio.bar_width / 4) and ratio.kind == "changed"
    assert clipped.fill_width == clipped.bar_width and clipped.kind == "new" and clipped.tag == "∇ new"
    assert member.fraction == 1.0 and member.tag == "∇ 300%"  # capped at a full bar, the text says more
    for node_id, mark in marks.items():
        box = screen.graph.node(node_id)
        above = mark.bar_y + mark.bar_height <= box.y and mark.text_y < box.y
        below = mark.text_y - 12 >= box.y + box.height
        assert above or below, node_id
        assert box.x <= mark.text_x and mark.bar_x + mark.bar_width <= box.x + box.width, node_id
        row = (mark.text_x, mark.text_y - 11, mark.bar_x + mark.bar_width - mark.text_x, 13)
        assert not crosses_any(screen.graph.edges, row), node_id   # the edge into the node passes beside it


# -- the view model ------------------------------------------------------------------------

def test_off_offers_the_compare_button_the_form_and_the_cases():
    _, c = view({})
    assert not c.on and c.a is None and "vs_preset=trl" in c.enter_url
    assert c.form.b_preset == "trl" and [link.case.id for link in c.cases] == [k.id for k in CASES]
    assert not any(link.current for link in c.cases)


def test_on_says_what_a_and_b_are_and_lists_what_differs():
    screen, c = view({"vs_preset": "trl"}, node="ratio")
    assert c.on and c.a.preset == "deepseekmath" and c.b.preset == "trl"
    assert "DeepSeekMath paper" in c.a.words and "TRL 1.16 defaults" in c.b.words
    assert "never the samples" in c.b.words
    assert {r.name for r in c.conventions} == {"preset", "advantage_std", "beta", "kl_bias_correction",
                                             "loss_aggregation"}
    assert len(c.samples) == 8 and c.sample_count == 8
    assert c.node is not None and c.node.node_id == "ratio" and c.node.tag == "∇ 6.5%"
    assert c.marks["ratio"].tag == "∇ 6.5%" and c.marks["divergence"].tag == "∇ 100%"  # B: β = 0
    assert "B has β = 0: its KL term is computed but does not enter the loss." in c.beta_notes
    assert {k: v for k, v in parse_qsl(urlsplit(c.leave_url).query)} == {"node": "ratio"}
    swap = dict(parse_qsl(urlsplit(c.swap_url).query))
    assert swap["preset"] == "trl" and swap["vs_preset"] == "deepseekmath"
    assert c.api_url.startswith("/api/walkthroughs/toy_grpo/compare?step=clip")
    assert c.status == 200


def test_each_case_link_opens_as_current():
    for case in CASES:
        _, c = view(dict(case.vs), params=case.params)
        assert c.active_case is not None and c.active_case.case.id == case.id
        assert case.title in c.banner


def test_form_keeps_other_state_and_names_refusals():
    _, c = view({"vs_preset": "trl", "vs_advantage_std": "population"}, node="ratio",
                params=GRPOParams(seed=3, beta=0))
    hidden = dict(c.form.hidden)
    assert hidden["seed"] == "3" and hidden["beta"] == "0" and hidden["node"] == "ratio"
    assert hidden["vs_advantage_std"] == "population" and "vs_preset" not in hidden
    _, refused = view({"vs_beta": "11", "vs_seed": "2"})
    assert refused.status == 422 and "0 <= beta <= 10" in refused.form.errors["vs_beta"]
    assert [k for k, _ in refused.form.other_errors] == ["vs_seed"]
    assert "vs_seed" not in dict(refused.form.hidden)
