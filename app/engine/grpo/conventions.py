"""The choices where GRPO implementations differ, as pure torch functions.

Each function takes per-token tensors shaped (G, T) with a 0/1 `mask` of the same
shape (the toy's completions are one token: T = 1), so the same code serves a
token-level model. Formulas and their sources are in docs/design.md §3; the peer
tests (peers/) feed the same numbers to TRL's and verl's own functions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def group_advantages(rewards: torch.Tensor, std: str, eps: float) -> torch.Tensor:
    """(G,) -> (G,). `population` (DeepSeekMath as written), `sample` (Bessel: TRL and verl
    both call torch's unbiased std), `none` (Dr. GRPO: centre only, eps unused)."""
    mean = rewards.mean()
    # One refinement step: torch's rounded mean of three 0.1s is not 0.1, which left an equal
    # group ~1e-17 off zero (A = -1 at eps = 1e-300). Refined, an equal group centres to exactly
    # 0, so A = 0 whatever eps is; elsewhere it only makes the mean more accurate.
    mean = mean + (rewards - mean).mean()
    centred = rewards - mean
    if std == "none":
        return centred
    if std == "population":
        return centred / (rewards.std(unbiased=False) + eps)
    if std == "sample":
        return centred / (rewards.std(unbiased=True) + eps)
    raise ValueError(f"unknown advantage_std {std!r}")


def clamp_log_ratio(log_ratio: torch.Tensor, bound: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """verl clamps log-ratios to ±20 before exp() (overflow guard). Returns (value, hit)."""
    if bound is None:
        return log_ratio, torch.zeros_like(log_ratio, dtype=torch.bool)
    return log_ratio.clamp(-bound, bound), log_ratio.detach().abs() > bound


@dataclass(frozen=True)
class Surrogate:
    value: torch.Tensor  # (G, T) the objective term L (to maximise)
    clip_active: torch.Tensor  # the band binds: min() took the clipped, constant branch
    dual_clip_hit: torch.Tensor  # A < 0 and the dual clip's floor c·A binds


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float,
                      dual_clip: float | None) -> Surrogate:
    """min(ρA, clip(ρ, 1-ε_low, 1+ε_high)A); with dual clip c (verl, Ye et al. 2020), for A < 0
    the term is also floored at c·A, so a huge ρ on a bad sample cannot dominate the loss."""
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high) * adv
    value = torch.minimum(unclipped, clipped)
    with torch.no_grad():
        clip_active = ((adv > 0) & (ratio > 1 + eps_high)) | ((adv < 0) & (ratio < 1 - eps_low))
        dual_hit = torch.zeros_like(clip_active)
    if dual_clip is not None:
        floor = dual_clip * adv
        with torch.no_grad():
            dual_hit = (adv < 0) & (value < floor)
        value = torch.where(adv < 0, torch.maximum(value, floor), value)
    return Surrogate(value, clip_active, dual_hit)


@dataclass(frozen=True)
class KLEstimate:
    value: torch.Tensor  # (G, T) the estimate, after any clamp
    log_ratio_clamped: torch.Tensor
    kl_clamped: torch.Tensor


def kl_estimate(logp: torch.Tensor, logp_ref: torch.Tensor, estimator: str,
                log_ratio_bound: float | None = None, kl_bound: float | None = None) -> KLEstimate:
    """Schulman's estimators of KL(π_θ || π_ref) from one sample, with Δ = log π_ref − log π_θ:
    k1 = −Δ, k2 = Δ²/2, k3 = exp(Δ) − Δ − 1 (≥ 0). The clamps guard k3's exp() as verl's
    low_var_kl does (Δ to ±log_ratio_bound, the value to ±kl_bound); like verl, k1 and k2 are
    never clamped (they cannot overflow)."""
    if estimator != "k3":
        log_ratio_bound = kl_bound = None
    delta, ratio_hit = clamp_log_ratio(logp_ref - logp, log_ratio_bound)
    if estimator == "k1":
        value = -delta
    elif estimator == "k2":
        value = 0.5 * delta.square()
    elif estimator == "k3":
        value = torch.exp(delta) - delta - 1
    else:
        raise ValueError(f"unknown kl_estimator {estimator!r}")
    kl_hit = torch.zeros_like(ratio_hit)
    if kl_bound is not None:
        kl_hit = value.detach().abs() > kl_bound
        value = value.clamp(-kl_bound, kl_bound)
    return KLEstimate(value, ratio_hit, kl_hit)


def aggregation_weights(mask: torch.Tensor, mode: str, max_length: int) -> torch.Tensor:
    """(G, T) weights w with loss = Σ w·per_token_loss, i.e. what each token counts for.

    sample_mean: 1/(G·|o_i|), the GRPO paper (long answers' tokens count less).
    token_mean: 1/Σ|o|, DAPO / TRL `dapo` and `bnpo` / verl `token-mean`.
    token_sum_norm: 1/(G·max_length), Dr. GRPO / TRL `dr_grpo` / verl `seq-mean-token-sum-norm`.
    """
    mask = mask.to(torch.float64 if mask.dtype == torch.bool else mask.dtype)
    groups = mask.shape[0]
    if mode == "sample_mean":
        return mask / (groups * mask.sum(-1, keepdim=True).clamp(min=1))
    if mode == "token_mean":
        return mask / mask.sum().clamp(min=1)
    if mode == "token_sum_norm":
        return mask / (groups * max_length)
    raise ValueError(f"unknown loss_aggregation {mode!r}")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, max_length: int) -> torch.Tensor:
    """The scalar the frameworks compute, in their order of operations (sums, then one division),
    so the float rounding matches theirs as closely as the formula allows."""
    masked = per_token * mask
    groups = per_token.shape[0]
    if mode == "sample_mean":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if mode == "token_mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if mode == "token_sum_norm":
        return masked.sum() / (groups * max_length)
    raise ValueError(f"unknown loss_aggregation {mode!r}")
