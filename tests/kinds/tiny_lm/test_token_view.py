"""The tiny-LM walkthrough's token views: the token panel, node names, the form and the view query."""
from __future__ import annotations

import re

import pytest
from paths import ROOT

from app.domain.snapshot import load_snapshot
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.step import run_token_step
from app.kinds.tiny_lm.views.token_form import PRESET_FILLED, TokenForm
from app.kinds.tiny_lm.views.token_steps import STEP_METRIC, build_token_panel
from app.kinds.tiny_lm.views.url_state import BadTokenView, read_token_query
from app.views.meaning import node_meaning
from app.views.numbers import ratio, readout
from app.views.tokens.token_view import CLIP_METRICS, METRICS, VALUES

TINY = ROOT / "walkthroughs" / "tiny_lm_grpo.tensorviz.json"
STEPS = ("sample", "rewards", "advantages", "ratio", "kl", "aggregation", "update")
NAMED = ("policy", "old_policy", "reference_policy", "policy.token_logprobs", "advantages", "ratio", "clipped",
         "divergence", "aggregate", "policy.blocks.0", "softmax@policy.blocks.0.attention#0", "input", "output")
GENERIC = re.compile(r"^A module of \d+ layers?, drawn as one box")


@pytest.fixture(scope="module")
def result():
    return run_token_step(TokenParams())


@pytest.fixture(scope="module")
def snapshot():
    return load_snapshot(TINY)


# -- the panel --------------------------------------------------------------------------

@pytest.mark.parametrize("step", STEPS)
def test_default_metric_per_step(result, step):
    panel = build_token_panel(result, step)
    assert panel.metric.id == STEP_METRIC[step]
    assert panel.step_id == step
    assert len(panel.rows) == result.group_size
    assert [len(r.cells) for r in panel.rows] == [c.length for c in result.completions]


def test_unknown_step_falls_back_to_grad(result):
    assert build_token_panel(result, "no-such-step").metric.id == "grad"


@pytest.mark.parametrize("metric", list(METRICS))
def test_bars_within_unit_and_clip_only_on_clip_strips(result, metric):
    panel = build_token_panel(result, "ratio", metric)
    assert panel.metric.id == metric
    cells = [cell for row in panel.rows for cell in row.cells]
    assert all(-1.0 <= cell.bar <= 1.0 for cell in cells), [c.bar for c in cells]
    tokens = [t for c in result.completions for t in c.tokens]
    if metric in CLIP_METRICS:
        assert [cell.clipped for cell in cells] == [t.clip_active for t in tokens]
    else:
        assert not any(cell.clipped for cell in cells)
    # the largest |bar| is 1 unless every value sits on the centre
    if any(cell.bar for cell in cells):
        assert max(abs(cell.bar) for cell in cells) == pytest.approx(1.0)
    # the printed value is the metric of the record
    pairs = [(t, c) for c in result.completions for t in c.tokens]
    for cell, (token, completion) in zip(cells, pairs, strict=True):
        assert cell.value == VALUES[metric](token, completion)
        assert cell.text == token.text




def test_card_and_label_carry_the_ratio(result):
    panel = build_token_panel(result, "ratio")
    cell, token = panel.rows[0].cells[0], result.completions[0].tokens[0]
    assert ("ρ", ratio(token.ratio)) in cell.card
    assert f"ρ {ratio(token.ratio)}" in cell.label
    assert cell.label.startswith(f"token {token.text}: ")


def test_length_contrast_numbers_are_the_records_weights(result):
    panel = build_token_panel(result, "aggregation")
    contrast = panel.contrast
    assert contrast is not None, "the default group mixes lengths; a contrast is expected"
    cs, cl = result.completions[contrast.short], result.completions[contrast.long]
    assert cs.length < cl.length and cs.advantage * cl.advantage > 0
    s = contrast.sentence
    assert f"Completion {contrast.short} has {cs.length} tokens, completion {contrast.long} has {cl.length}" in s
    assert f"A = {readout(cs.advantage)} and {readout(cl.advantage)}" in s
    for mode in ("sample_mean", "token_mean", "token_sum_norm"):
        ws, wl = cs.weight_by_aggregation[mode], cl.weight_by_aggregation[mode]
        assert f"{mode}: {readout(ws)} vs {readout(wl)} per token ({readout(ws / wl)}×)" in s
        # the weights are the tokens' own w under the aggregation in force
        if mode == result.params.loss_aggregation:
            assert all(t.weight == pytest.approx(ws) for t in cs.tokens)
            assert all(t.weight == pytest.approx(wl) for t in cl.tokens)
    # the paper's mean per completion weighs the short one's tokens more
    assert cs.weight_by_aggregation["sample_mean"] > cl.weight_by_aggregation["sample_mean"]


# -- node names -------------------------------------------------------------------------

def test_every_node_has_a_meaning(snapshot):
    for node_id in snapshot.node_map:
        meaning = node_meaning(snapshot, node_id)
        assert meaning.display_name.strip(), node_id


@pytest.mark.parametrize("node_id", NAMED)
def test_named_nodes_are_not_the_generic_module_sentence(snapshot, node_id):
    assert node_id in snapshot.node_map, node_id
    meaning = node_meaning(snapshot, node_id)
    texts = [str(v) for v in vars(meaning).values() if isinstance(v, str)]
    assert meaning.display_name and not any(GENERIC.match(t) for t in texts), (node_id, meaning)


# -- the form ---------------------------------------------------------------------------

def test_form_leaves_preset_filled_fields_blank():
    form = TokenForm.from_params(TokenParams())
    for name in PRESET_FILLED:
        assert name not in form.values and form.in_force[name], name
    assert form.values["seed"] == str(TokenParams().seed)
    assert not form.invalid


def test_form_keeps_an_override():
    params = TokenParams(clip_epsilon=0.3)
    form = TokenForm.from_params(params)
    assert form.values["clip_epsilon"] == "0.3"
    assert "beta" not in form.values and "loss_aggregation" not in form.values
    assert form.in_force["clip_epsilon"] == "0.3"


def test_refused_query_names_the_field():
    q = read_token_query({"group_size": "99"})
    assert q.form is not None and q.form.invalid and "group_size" in q.form.errors
    assert q.form.values["group_size"] == "99"
    assert q.params == TokenParams()


# -- the view query ---------------------------------------------------------------------

@pytest.mark.parametrize("query, words", [
    ({"metric": "nope"}, "metric"), ({"head": "x"}, "head"), ({"completion": "-1"}, "completion"),
    ({"completion": "1234"}, "completion"),
])
def test_bad_view_values_raise(query, words):
    with pytest.raises(BadTokenView, match=words):
        read_token_query(query)


def test_good_view_values_are_read():
    q = read_token_query({"metric": "kl", "completion": "2", "head": "1"})
    assert (q.metric, q.completion, q.head) == ("kl", 2, 1)
    assert q.query() == {"metric": "kl", "completion": "2", "head": "1"}
