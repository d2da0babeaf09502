"""What an IS correction does to a run step's gradient (app/runs/engine/is_effect.py), against verl 0.9.1:
verl's own rollout-correction weights (rollout_corr_helper.compute_rollout_correction_weights, as its trainer calls
it: rollout_is token / sequence, TIS with the upper bound for *_truncate, IcePop "lower_upper" for *_mask) handed to
verl's actor loss (workers.utils.losses.ppo_loss, vanilla, token-mean), whose backward gives d loss / d log pi per
token; the app's numbers come from the run reader's path (TrainedTokens of d and A, sequences back to back).

The setting is the run reader's: pi_old = pi_trainer (num_iterations = 1, rho_theta/old = 1), no KL term, the token
mean over the step's tokens, band [0.5, 2]. Ragged sequences (1 to 40 tokens), token outliers past both ends of the
band, sequence sums of log-ratios inside verl's +-20 safety bound. Compared: N x gradient per token (N the step's
tokens, so each is -A x weight, of order 1), and the norm ratio, cosine and masked share computed from verl's
gradients against the app's metrics."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from app.runs.engine.is_effect import MODES, NONE, TrainedTokens, conventions, gradient, is_effect_metrics
from peers.cases import agree
from peers.test_verl import actor_config, verl_actor_loss, verl_is_weights

FRAMEWORK = "verl"


def step(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 41, size=10)
    seqs = []
    for n in lengths:
        d = rng.normal(0.0, 0.08, n)
        if n > 5:
            d[rng.choice(n, size=2, replace=False)] = rng.choice([1.3, -1.1], size=2)  # ratio 3.7 or 0.33
        seqs.append(d)
    return seqs, rng.normal(size=lengths.size)


def verl_gradient(seqs: list[np.ndarray], adv: np.ndarray, mode: str) -> tuple[np.ndarray, torch.Tensor | None]:
    """verl's d loss / d log pi per trained token (sequences back to back), and its rollout IS weights."""
    width = max(len(d) for d in seqs)
    mask = torch.zeros(len(seqs), width, dtype=torch.int64)
    d = torch.zeros(len(seqs), width, dtype=torch.float64)
    for i, row in enumerate(seqs):
        mask[i, :len(row)] = 1
        d[i, :len(row)] = torch.from_numpy(row)
    sampling = -3.0 + torch.zeros_like(d)  # log pi_rollout; the trainer's is it + d
    logp = (sampling + d).requires_grad_(True)
    old = logp.detach().clone()
    weights = None if mode == NONE else verl_is_weights(conventions(mode), old, sampling, mask)
    verl_actor_loss(actor_config(conventions(mode), len(seqs)), logp, old, old.clone(),
                    torch.from_numpy(adv).unsqueeze(1) * mask, mask, rollout_is_weights=weights)
    assert logp.grad is not None
    return logp.grad[mask.bool()].numpy(), None if weights is None else weights[mask.bool()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gradient_under_each_correction_is_verl_s(seed):
    seqs, adv = step(seed)
    lengths = np.array([len(d) for d in seqs])
    tokens = TrainedTokens(np.concatenate(seqs), np.repeat(adv, lengths), lengths)
    n = tokens.log_ratio.size
    verl = {}
    for mode in (NONE, *MODES):
        got, weights = verl_gradient(seqs, adv, mode)
        mine, hit = gradient(tokens, mode)
        agree(FRAMEWORK, f"IS effect: N x d loss/d log pi ({mode})", f"seed {seed}", got * n, mine * n)
        if mode.endswith("mask"):
            assert weights is not None and np.array_equal((weights == 0).numpy(), hit), mode
            assert 0 < hit.sum() < n, mode  # the mask binds on some tokens, not all: the comparison says something
        verl[mode] = got
    app = is_effect_metrics(tokens)
    g0 = verl[NONE]
    for mode in MODES:
        g = verl[mode]
        norm = np.linalg.norm(g) / np.linalg.norm(g0)
        agree(FRAMEWORK, "IS effect: norm ratio", f"seed {seed} {mode}", norm, app[f"tokens/is_grad/{mode}/norm_ratio"])
        if np.linalg.norm(g) > 0:
            cosine = g @ g0 / (np.linalg.norm(g) * np.linalg.norm(g0))
            agree(FRAMEWORK, "IS effect: cosine", f"seed {seed} {mode}", cosine, app[f"tokens/is_grad/{mode}/cosine"])
