"""∂loss/∂log π split into its surrogate and KL parts (engine/grpo/gradient_parts.py), on the shared
token-level step: the parts add up to the loss's own gradient (1e-12, float64), and each equals the
float64 reference's hand-derived part (tests/grpo_reference.py, token_gradient_parts) under every
convention: the aggregations, Dr. GRPO, DAPO, GSPO's sequence ratio, CISPO, the KL in the reward,
TRL's KL × ρ, verl's clamps, the IS correction."""
import math

import grpo_reference as ref
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_token_grpo import CONVENTIONS, groups, tensors

from app.engine.grpo.gradient_parts import gradient_parts
from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import token_grpo_step, token_loss_parts

TOL = 1e-12


def _parts(rows, rewards, c: Conventions, sampling=None):
    logp, logp_old, logp_ref, r, mask = tensors(rows, rewards)
    samp = None
    if sampling is not None:
        samp = torch.zeros_like(logp_old)
        for i, row in enumerate(sampling):
            samp[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
    step = token_grpo_step(logp, logp_old, logp_ref, r, mask, c, logp_sampling=samp)
    surrogate, kl = gradient_parts(token_loss_parts(step, mask, c), logp)
    step.loss.backward()
    return surrogate, kl, logp.grad, mask


def _close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=TOL)


def _check(rows, rewards, c: Conventions, sampling=None):
    surrogate, kl, total, mask = _parts(rows, rewards, c, sampling)
    assert torch.all(surrogate[mask == 0] == 0) and torch.all(kl[mask == 0] == 0)
    assert torch.allclose(surrogate + kl, total, rtol=0, atol=TOL)
    want_s, want_k = ref.token_gradient_parts(rows, rewards, c.model_dump(), sampling=sampling)
    for i, row in enumerate(rows):
        for t in range(len(row)):
            assert _close(float(surrogate[i, t]), want_s[i][t]), ("surrogate", i, t, float(surrogate[i, t]),
                                                                  want_s[i][t])
            assert _close(float(kl[i, t]), want_k[i][t]), ("kl", i, t, float(kl[i, t]), want_k[i][t])
    return surrogate, kl


def _off_kinks(rows, c: Conventions) -> bool:
    """The reference's piecewise slopes and torch's differ only exactly on a kink (ρ on a clip edge,
    a clamp's bound): hypothesis's floats can land there, a real run does not."""
    for row in rows:
        for lp, lo, _lr in row:
            for edge in (1 - c.clip_epsilon, 1 + c.clip_epsilon_high):
                if abs(math.exp(lp - lo) - edge) < 1e-9:
                    return False
    return True


@settings(max_examples=150, deadline=None)
@given(group=groups(), fields=CONVENTIONS, level=st.sampled_from(["token", "sequence"]),
       policy=st.sampled_from(["clip", "cispo"]))
def test_parts_add_up_and_equal_the_reference_under_every_convention(group, fields, level, policy):
    rows, rewards = group
    c = Conventions(**{**fields, "importance_sampling_level": level, "policy_loss": policy,
                       **({"clip_epsilon_high": 1.3} if policy == "cispo" else {})})
    if _off_kinks(rows, c):
        _check(rows, rewards, c)


ROWS = [[(-1.2, -1.5, -0.7), (-0.3, -0.2, -0.9), (-2.0, -2.6, -1.1)],
        [(-0.5, -0.4, -0.8)],
        [(-1.0, -0.6, -1.4), (-0.9, -1.3, -0.2)],
        [(-2.2, -1.9, -2.9), (-0.1, -0.4, -0.3), (-1.7, -1.2, -1.0), (-0.6, -0.6, -0.6)]]
REWARDS = [1.0, 0.0, 0.5, 0.0]


@pytest.mark.parametrize("preset", ["deepseekmath", "trl", "verl", "dr_grpo", "dapo", "gspo", "cispo"])
def test_every_preset_with_a_kl_term(preset):
    """Each preset as it ships (several have β = 0: their KL part is exactly 0) and with β = 0.1."""
    shipped = Conventions(preset=preset, max_length=6)
    surrogate, kl = _check(ROWS, REWARDS, shipped)
    if shipped.beta == 0:
        assert torch.all(kl == 0)
    surrogate, kl = _check(ROWS, REWARDS, Conventions(preset=preset, max_length=6, beta=0.1))
    assert torch.any(kl != 0) and torch.any(surrogate != 0)


def test_a_clipped_token_keeps_its_kl_part():
    """The point of the split: where the clip binds the surrogate part is exactly 0, the KL part is not."""
    c = Conventions(beta=0.1)
    surrogate, kl, total, _ = _parts(ROWS, REWARDS, c)
    logp, logp_old, logp_ref, r, m = tensors(ROWS, REWARDS)
    clipped = token_grpo_step(logp, logp_old, logp_ref, r, m, c).clip_active
    assert clipped.any()
    assert torch.all(surrogate[clipped] == 0) and torch.all(kl[clipped] != 0)
    assert torch.equal(total[clipped], kl[clipped])


def test_the_kl_in_the_reward_has_no_kl_part():
    surrogate, kl = _check(ROWS, REWARDS, Conventions(beta=0.2, kl_placement="reward"))
    assert torch.all(kl == 0) and torch.any(surrogate != 0)


@pytest.mark.parametrize("mode", ["token_truncate", "sequence_mask"])
def test_the_is_correction_weighs_the_surrogate_part_only(mode):
    sampling = [[lo + 0.3 * ((i + t) % 3 - 1) for t, (_, lo, _) in enumerate(row)] for i, row in enumerate(ROWS)]
    c = Conventions(beta=0.1, is_correction=mode, is_clip_min=0.8, is_clip_max=1.2)
    _check(ROWS, REWARDS, c, sampling)
