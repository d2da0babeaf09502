"""The update step's explanation (issue 20), checked against an independent float64 computation:
the KL term's share of each token's ∂loss/∂log π from k3's derivative by hand, and each partial
update (no terms, one completion's own terms, the others') by a hand-written AdamW step on a
gradient built from the paper's formulas, not from the engine's loss code."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from app.kinds.tiny_lm.domain.arith_task import encode, make_prompts
from app.kinds.tiny_lm.engine import step as tw
from app.kinds.tiny_lm.engine.lm_sampling import sample_group
from app.kinds.tiny_lm.engine.params import MAX_NEW_TOKENS, TokenParams
from app.kinds.tiny_lm.engine.tiny_lm import completion_logprobs

PARAMS = TokenParams()  # the paper's conventions: population std, k3 in the loss, mean per completion


@pytest.fixture(scope="module")
def setup():
    """The engine's own state before the update (the same calls the engine makes), and its result."""
    params = PARAMS
    base = tw.base_model("cpu")
    prompt = make_prompts(1, params.seed)[0]
    group = sample_group(base, encode(prompt.text), params.group_size, MAX_NEW_TOKENS, params.seed)
    _parts, rewards = tw._rewards(params, prompt, group)
    policy, optimiser = tw._policy_after(base, group, rewards, params, params.inner_steps)
    with torch.no_grad():
        logp_old = completion_logprobs(base, group.ids, group.prompt_length)
    return params, group, rewards, policy, optimiser, logp_old, tw.run_token_step(params)


def hand_grad_logp(logp: torch.Tensor, logp_old, rewards, mask, rows, params, with_kl=True) -> torch.Tensor:
    """∂(Σ_{i in rows} loss_i)/∂log π per token, from DeepSeekMath eq. 3-4 written out by hand."""
    g, _t = mask.shape
    r = rewards.double()
    a = (r - r.mean()) / (r.std(unbiased=False) + params.advantage_epsilon)  # (G,)
    lengths = mask.sum(-1)
    out = torch.zeros_like(logp)
    eps = params.clip_epsilon
    for i in range(g):
        if not rows[i]:
            continue
        w = 1.0 / (g * float(lengths[i]))
        for t in range(int(lengths[i])):
            rho = math.exp(float(logp[i, t] - logp_old[i, t]))
            clipped = (a[i] > 0 and rho > 1 + eps) or (a[i] < 0 and rho < 1 - eps)
            d_surrogate = 0.0 if clipped else rho * float(a[i])  # d(ρA)/d log π = ρA
            delta = float(logp_old[i, t] - logp[i, t])  # π_ref = π_old = the base here
            d_k3 = 1.0 - math.exp(delta)  # d(e^Δ − Δ − 1)/d log π
            out[i, t] = -w * d_surrogate + (w * params.beta * d_k3 if with_kl else 0.0)
    return out


def hand_adamw(policy, optimiser, grads) -> torch.nn.Module:
    """One AdamW step (weight decay 0) from the optimiser's state, written out."""
    moved = copy.deepcopy(policy)
    group = optimiser.param_groups[0]
    b1, b2 = group["betas"]
    lr, eps = group["lr"], group["eps"]
    assert group["weight_decay"] == 0.0
    with torch.no_grad():
        for p, q, g in zip(policy.parameters(), moved.parameters(), grads, strict=True):
            st = optimiser.state[p]
            step = float(st["step"]) + 1
            m = b1 * st["exp_avg"] + (1 - b1) * g
            v = b2 * st["exp_avg_sq"] + (1 - b2) * g * g
            denom = (v.sqrt() / math.sqrt(1 - b2 ** step)) + eps
            q.copy_(p - (lr / (1 - b1 ** step)) * m / denom)
    return moved


def hand_moved(setup, rows, with_kl=True) -> list[float]:
    params, group, rewards, policy, optimiser, logp_old, _ = setup
    logp = completion_logprobs(policy, group.ids, group.prompt_length)
    mask = group.mask.double()
    g_logp = hand_grad_logp(logp.detach(), logp_old, rewards, mask, rows, params, with_kl) * mask
    grads = torch.autograd.grad((logp * g_logp).sum(), list(policy.parameters()), allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(policy.parameters(), grads, strict=True)]
    moved = hand_adamw(policy, optimiser, grads)
    with torch.no_grad():
        after = completion_logprobs(moved, group.ids, group.prompt_length)
    return [float(v) for v in ((after - logp.detach()) * mask).sum(-1)]


def test_the_real_update_is_the_all_terms_part(setup):
    result = setup[-1]
    for c, part in zip(result.completions, result.update_parts, strict=True):
        assert part.all_terms == pytest.approx(sum(t.delta_logp for t in c.tokens), abs=1e-12)


def test_parts_match_a_hand_written_adamw_step(setup):
    result = setup[-1]
    g = result.group_size
    every = hand_moved(setup, [True] * g)
    memory = hand_moved(setup, [False] * g)
    for i, part in enumerate(result.update_parts):
        own = [k == i for k in range(g)]
        assert part.all_terms == pytest.approx(every[i], rel=1e-7, abs=1e-10)
        assert part.momentum_only == pytest.approx(memory[i], rel=1e-7, abs=1e-10)
        assert part.own == pytest.approx(hand_moved(setup, own)[i], rel=1e-7, abs=1e-10)
        assert part.own_surrogate == pytest.approx(hand_moved(setup, own, with_kl=False)[i], rel=1e-7, abs=1e-10)
        assert part.others == pytest.approx(hand_moved(setup, [not x for x in own])[i], rel=1e-7, abs=1e-10)


def test_kl_share_of_the_gradient_is_k3s_derivative(setup):
    params, group, *_ , result = setup
    clipped_with_pull = 0
    for i, c in enumerate(result.completions):
        w = 1.0 / (result.group_size * c.length)
        for k, t in enumerate(c.tokens):
            by_hand = w * params.beta * (1.0 - math.exp(t.logp_ref - t.logp))
            assert result.grad_kl[i][k] == pytest.approx(by_hand, rel=1e-9, abs=1e-15)
            if t.clip_active:  # the surrogate gives nothing: all of its gradient is the KL term's
                assert t.grad == pytest.approx(result.grad_kl[i][k], rel=1e-9, abs=1e-15)
                clipped_with_pull += result.grad_kl[i][k] != 0
    assert clipped_with_pull > 0, "the default group has clipped tokens the KL term still moves"


def test_the_default_group_has_a_negative_advantage_that_rises_through_the_others(setup):
    """The case the update step explains: A < 0, its own terms alone lower it, the others' raise it."""
    result = setup[-1]
    risers = [(c, p) for c, p in zip(result.completions, result.update_parts, strict=True)
              if c.advantage < 0 and p.all_terms > 0]
    assert risers
    c, p = max(risers, key=lambda cp: cp[1].all_terms)
    assert p.own < 0 < p.others
