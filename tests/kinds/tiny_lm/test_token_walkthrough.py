"""The tiny-LM walkthrough's recorded step (issue 13): every node of the exported file has a
value (and a gradient where one flows), every per-token number matches an independent float64
recomputation from the same log-probs, and the run is deterministic."""
from __future__ import annotations

import json
import math

import grpo_reference as ref
import pytest
import torch
from paths import ROOT

from app.domain.snapshot import load_snapshot
from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import token_grpo_step
from app.export.__main__ import TARGETS
from app.export.document import export
from app.export.steps import read_steps
from app.kinds.tiny_lm.engine import step as tw
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.tiny_lm_grpo import TinyLMGRPO, build_tiny_lm_grpo
from app.kinds.tiny_lm.engine.token_node_map import is_token_runnable

FILE = ROOT / "walkthroughs" / "tiny_lm_grpo.tensorviz.json"
STEPS = ROOT / "walkthroughs" / "steps" / "tiny_lm_grpo.steps.json"
CASES = [TokenParams(), TokenParams(preset="trl", beta=0.04), TokenParams(preset="verl", seed=6),
         TokenParams(preset="dr_grpo", beta=0.04, seed=7), TokenParams(preset="dapo", inner_steps=3),
         TokenParams(kl_placement="reward", beta=0.2, kl_estimator="k1", seed=0)]


@pytest.fixture(scope="module")
def default():
    return tw.run_token_step(TokenParams())


def test_the_shipped_file_is_the_exporters_output_byte_for_byte():
    text = FILE.read_text()
    exported_at = json.loads(text)["exportedAt"]
    assert export(TARGETS["tiny_lm_grpo"], read_steps(STEPS), exported_at) == text


def test_every_node_of_the_file_is_recorded(default):
    snapshot = load_snapshot(FILE)
    assert is_token_runnable(snapshot)
    assert set(default.nodes) == snapshot.node_ids
    grads = {n for n, s in default.nodes.items() if s.grad_norm is not None}
    assert {"policy", "policy.embed", "policy.blocks.0.attention.qkv", "softmax@policy.blocks.1.attention#0",
            "policy.token_logprobs", "ratio", "clipped", "aggregate", "neg@TinyLMGRPO#0"} <= grads
    for frozen in ("old_policy.embed", "reference_policy.lm_head", "advantages", "input"):
        assert default.nodes[frozen].grad_norm is None and default.nodes[frozen].no_grad_reason


def test_a_node_reads_back_in_full_with_its_gradient(default):
    record = default.node("policy.token_logprobs")
    g, t = record.shape
    assert g == default.group_size and t == max(c.length for c in default.completions)
    for i, c in enumerate(default.completions):
        for j, tok in enumerate(c.tokens):
            assert record.values[i][j] == tok.logp and record.grad[i][j] == tok.grad
        assert all(v == 0 for v in record.grad[i][c.length:])  # padding gets no gradient


def test_attention_rows_are_causal_distributions(default):
    for block in (0, 1):
        weights = default.attention(block, 2, 1)
        for q, row in enumerate(weights):
            assert math.isclose(sum(row), 1.0, rel_tol=1e-12)
            assert all(w == 0 for w in row[q + 1:])


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p.preset}-{p.seed}-{p.kl_placement}")
def test_per_token_numbers_match_the_float64_reference(params):
    result = tw.run_token_step(params)
    c = params.conventions().model_dump()
    rows = [[(t.logp, t.logp_old, t.logp_ref) for t in comp.tokens] for comp in result.completions]
    rewards = [comp.reward for comp in result.completions]
    want = ref.token_loss(rows, rewards, c)
    assert math.isclose(result.loss, want, rel_tol=1e-11, abs_tol=1e-13)
    used = rewards
    if c["kl_placement"] == "reward":
        used = [r - c["beta"] * sum(ref.kl_estimate(lo, lr, c["kl_estimator"])[0] for _, lo, lr in row)
                for r, row in zip(rewards, rows, strict=True)]
    adv = ref.advantages(used, c["advantage_epsilon"], std_kind=c["advantage_std"])
    weights = ref.aggregation_weights([len(r) for r in rows], c["loss_aggregation"], c["max_length"])
    h = 1e-6
    for i, comp in enumerate(result.completions):
        assert math.isclose(comp.advantage, adv[i], rel_tol=1e-11, abs_tol=1e-12)
        for j, tok in enumerate(comp.tokens):
            assert math.isclose(tok.ratio, math.exp(tok.logp - tok.logp_old), rel_tol=1e-12)
            assert math.isclose(tok.weight, weights[i], rel_tol=1e-12)
            if c["kl_placement"] == "loss":
                assert math.isclose(tok.kl, ref.kl_estimate(tok.logp, tok.logp_ref, c["kl_estimator"])[0],
                                    rel_tol=1e-9, abs_tol=1e-15)

            def at(delta, i=i, j=j):
                moved = [list(r) for r in rows]
                lp, lo, lr = moved[i][j]
                moved[i][j] = (lp + delta, lo, lr)
                return ref.token_loss(moved, rewards, c)
            up, down = at(h), at(-h)
            if abs((up - want) - (want - down)) / h > 1e-4:
                continue  # a clip edge within h: the central difference means nothing there
            assert math.isclose(tok.grad, (up - down) / (2 * h), rel_tol=1e-5, abs_tol=1e-8), (i, j)


def test_each_aggregation_row_is_the_reference_loss(default):
    rows = [[(t.logp, t.logp_old, t.logp_ref) for t in comp.tokens] for comp in default.completions]
    rewards = [comp.reward for comp in default.completions]
    for agg in default.aggregations:
        c = default.params.conventions().model_copy(update={"loss_aggregation": agg.mode}).model_dump()
        assert math.isclose(agg.loss, ref.token_loss(rows, rewards, c), rel_tol=1e-11, abs_tol=1e-13)
        assert agg.grad_norm > 0
    # the row of the aggregation in force is the recorded step itself (same policy, before the update)
    in_force = next(a for a in default.aggregations if a.mode == default.params.loss_aggregation)
    assert math.isclose(in_force.grad_norm, default.policy_grad_norm, rel_tol=1e-9)


def test_the_module_is_token_grpo_step():
    result = tw.run_token_step(TokenParams())
    base = tw.base_model()
    for c in (Conventions(), Conventions(preset="verl", kl_placement="reward"), Conventions(preset="trl", beta=0.1)):
        torch.manual_seed(0)
        model = build_tiny_lm_grpo(base, base, base, c)
        with torch.no_grad():
            for p in model.policy.parameters():
                p.add_(torch.randn_like(p) * 0.01)
        from app.kinds.tiny_lm.domain.arith_task import encode
        from app.kinds.tiny_lm.engine.lm_sampling import sample_group
        group = sample_group(base, encode(result.prompt_text), 6, 24, seed=1)
        rewards = torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0, 3.0], dtype=torch.float64)
        out = model(group.ids, group.mask, rewards, group.prompt_length)
        step = token_grpo_step(out["logp"], out["logp_old"], out["logp_ref"], rewards, group.mask, c)
        assert torch.allclose(out["loss"], step.loss, rtol=1e-13, atol=0)
        assert torch.equal(out["clip_active"], step.clip_active)
    assert isinstance(model, TinyLMGRPO)


def test_deterministic_for_params_and_device():
    tw._cached.cache_clear()
    a = tw.run_token_step(TokenParams(seed=5))
    tw._cached.cache_clear()
    b = tw.run_token_step(TokenParams(seed=5))
    assert a.completions == b.completions and a.loss == b.loss and a.nodes == b.nodes


def test_no_steps_taken_means_every_ratio_is_one():
    result = tw.run_token_step(TokenParams(inner_steps=0))
    assert all(t.ratio == 1.0 and not t.clip_active for c in result.completions for t in c.tokens)


def test_the_update_moves_probability_towards_the_advantage(default):
    moved = sum(c.advantage * sum(t.delta_logp for t in c.tokens) for c in default.completions)
    assert moved > 0


def test_the_default_group_shows_what_the_steps_talk_about(default):
    comps = default.completions
    assert {c.accuracy for c in comps} == {0.0, 1.0} and {c.format for c in comps} == {0.0, 1.0}
    assert any(c.language < 1 for c in comps)  # language mixing exists
    assert len({c.length for c in comps}) > 1  # lengths differ: padding and the length bias
    tokens = [t for c in comps for t in c.tokens]
    assert 0 < sum(t.clip_active for t in tokens) < len(tokens)
    assert all(t.kl >= 0 for t in tokens) and any(t.kl > 0 for t in tokens)
