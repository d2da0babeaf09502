"""The toy's ∂loss/∂log π per sample, split into its surrogate and KL parts (grad_surrogate, grad_kl):
they add up to the loss's gradient (1e-12, float64) and each equals the float64 reference's
hand-derived part (tests/grpo_reference.py token_gradient_parts, one-token completions), across presets."""
import grpo_reference as ref
import pytest

from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import run_grpo_step

TOL = 1e-12

CASES = [
    {},  # the paper's conventions: the walkthrough's default, whose reference step makes the claim
    {"preset": "trl", "beta": 0.04},  # KL × ρ, token mean, Bessel std
    {"preset": "verl", "beta": 0.05, "learning_rate": 0.8},  # dual clip, clamps
    {"preset": "dr_grpo", "beta": 0.04, "seed": 3},  # centre-only advantages, token_sum_norm
    {"preset": "dapo", "beta": 0.04, "seed": 1},  # clip-higher
    {"preset": "gspo", "beta": 0.04},  # ε = 3e-4: almost every row clipped, only the KL part left
    {"preset": "cispo", "beta": 0.04, "clip_epsilon_high": 1.1},
    {"kl_estimator": "k2", "beta": 0.3},
    {"kl_placement": "reward", "beta": 0.3},  # no KL term in the loss: the KL part is 0
    {"preset": "dr_grpo"},  # β = 0 as shipped
]


def uncached(params):
    return run_grpo_step.__wrapped__(params, "cpu")


@pytest.mark.parametrize("fields", CASES, ids=lambda f: "-".join(f"{k}={v}" for k, v in f.items()) or "default")
def test_parts_add_up_and_equal_the_reference(fields):
    params = GRPOParams(**fields)
    run = uncached(params)
    c = params.conventions()
    rows = [[(s["logp"], s["logp_old"], s["logp_ref"])] for s in run.samples]
    want_s, want_k = ref.token_gradient_parts(rows, [s["reward"] for s in run.samples], c.model_dump())
    for i, s in enumerate(run.samples):
        assert abs(s["grad_surrogate"] + s["grad_kl"] - s["grad_logp"]) <= TOL, i
        assert s["grad_surrogate"] == pytest.approx(want_s[i][0], rel=1e-9, abs=TOL), i
        assert s["grad_kl"] == pytest.approx(want_k[i][0], rel=1e-9, abs=TOL), i
    if c.beta == 0 or c.kl_placement == "reward":
        assert all(s["grad_kl"] == 0 for s in run.samples)
    else:
        assert any(s["grad_kl"] != 0 for s in run.samples)


def test_the_reference_steps_clipped_rows_are_moved_by_the_kl_alone():
    """The walkthrough's claim, on its default step: a clipped row's surrogate part is 0 and its
    KL part is not, so its whole ∂loss/∂log π is the KL's."""
    run = run_grpo_step(GRPOParams())
    clipped = [s for s in run.samples if s["clip_active"]]
    assert clipped
    for s in clipped:
        assert s["grad_surrogate"] == 0 and s["grad_kl"] != 0 and s["grad_logp"] == s["grad_kl"]
