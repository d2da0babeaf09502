"""The tiny LM's ∂loss/∂log π per token, split into its surrogate and KL parts (grad_surrogate,
grad_kl): they add up to the recorded gradient (1e-12, float64) and each equals the float64
reference's hand-derived part (tests/grpo_reference.py token_gradient_parts), across presets."""
import grpo_reference as ref
import pytest

from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.step import run_token_step

TOL = 1e-12

CASES = [
    {},  # the walkthrough's default (the paper's conventions): its KL step makes the claim
    {"preset": "trl", "beta": 0.04},  # KL × ρ, token mean
    {"preset": "dr_grpo", "beta": 0.04},  # token_sum_norm over max_length
    {"preset": "gspo", "beta": 0.04, "clip_epsilon": 0.01, "clip_epsilon_high": 0.01},  # sequence ratio, KL × ρ
    {"preset": "cispo", "beta": 0.04, "clip_epsilon_high": 1.01},
    {"kl_placement": "reward", "beta": 0.2},
]


@pytest.mark.parametrize("fields", CASES, ids=lambda f: "-".join(f"{k}={v}" for k, v in f.items()) or "default")
def test_parts_add_up_and_equal_the_reference(fields):
    params = TokenParams(**fields)
    result = run_token_step(params)
    c = params.conventions()
    rows = [[(t.logp, t.logp_old, t.logp_ref) for t in comp.tokens] for comp in result.completions]
    want_s, want_k = ref.token_gradient_parts(rows, [comp.reward for comp in result.completions], c.model_dump())
    for i, comp in enumerate(result.completions):
        for t, tok in enumerate(comp.tokens):
            assert abs(tok.grad_surrogate + tok.grad_kl - tok.grad) <= TOL, (i, t)
            assert tok.grad_surrogate == pytest.approx(want_s[i][t], rel=1e-8, abs=TOL), (i, t)
            assert tok.grad_kl == pytest.approx(want_k[i][t], rel=1e-8, abs=TOL), (i, t)
            assert result.grad_kl[i][t] == tok.grad_kl
    kl = [tok.grad_kl for comp in result.completions for tok in comp.tokens]
    assert all(g == 0 for g in kl) if c.kl_placement == "reward" else any(g != 0 for g in kl)


def test_the_kl_steps_clipped_tokens_are_moved_by_the_kl_alone():
    result = run_token_step(TokenParams())
    clipped = [tok for comp in result.completions for tok in comp.tokens if tok.clip_active]
    assert clipped
    assert all(tok.grad_surrogate == 0 and tok.grad_kl != 0 for tok in clipped)
