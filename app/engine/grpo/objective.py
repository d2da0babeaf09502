"""The GRPO objective's pieces, in every convention where implementations differ, as pure torch
functions (the conventions themselves, as data, are params.Conventions).

Each function takes per-token tensors shaped (G, T) with a 0/1 `mask` of the same
shape (one-token completions are T = 1), so the same code serves a
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
    if std not in ("population", "sample"):
        raise ValueError(f"unknown advantage_std {std!r}")
    spread = rewards.std(unbiased=std == "sample") + eps
    # eps = 0 (no ε, as UNIPO writes it): a group of equal rewards centres to exactly 0 (above) and
    # has std 0, so A = 0, as with any eps > 0, not 0/0
    return centred / spread if eps > 0 else torch.where(spread > 0, centred / spread.clamp(min=1e-300),
                                                         torch.zeros_like(centred))


def clamp_log_ratio(log_ratio: torch.Tensor, bound: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """verl clamps log-ratios to ±20 before exp() (overflow guard). Returns (value, hit)."""
    if bound is None:
        return log_ratio, torch.zeros_like(log_ratio, dtype=torch.bool)
    return log_ratio.clamp(-bound, bound), log_ratio.detach().abs() > bound


def policy_log_ratio(logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor | None, level: str,
                     bound: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The log of the importance ratio ρ, then the clamp (value, hit). `token`: log π_θ − log π_old per
    token. `sequence` (GSPO; TRL importance_sampling_level="sequence", grpo_trainer.py ~line 3087): the
    masked mean over each completion's tokens, shape (G, 1), so ρ_i = (π_θ(o_i)/π_old(o_i))^(1/|o_i|) is
    one number per completion, its gradient shared by all its tokens. One-token completions (a per-sample kind's
    (G,) tensors, or no mask) have one level only."""
    log_ratio = logp - logp_old
    if level == "sequence" and mask is not None and log_ratio.dim() > 1:
        log_ratio = (log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)
    elif level not in ("token", "sequence"):
        raise ValueError(f"unknown importance_sampling_level {level!r}")
    return clamp_log_ratio(log_ratio, bound)


@dataclass(frozen=True)
class Surrogate:
    value: torch.Tensor  # (G, T) the objective term L (to maximise)
    clip_active: torch.Tensor  # clip_low | clip_high: the clip binds (clip: min() took the constant branch)
    dual_clip_hit: torch.Tensor  # A < 0 and the dual clip's floor c·A binds
    # TRL's clip_ratio/low and /high flags (grpo_trainer.py ~line 3268): ρ < 1−ε_low with A < 0, ρ > 1+ε_high
    # with A > 0; for cispo (its cispo_clip_ratio) ρ > ε_high with A > 0, and never low
    clip_low: torch.Tensor
    clip_high: torch.Tensor


def clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float,
                      dual_clip: float | None) -> Surrogate:
    """min(ρA, clip(ρ, 1-ε_low, 1+ε_high)A); with dual clip c (verl, Ye et al. 2020), for A < 0
    the term is also floored at c·A, so a huge ρ on a bad sample cannot dominate the loss."""
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high) * adv
    value = torch.minimum(unclipped, clipped)
    with torch.no_grad():
        low, high = (adv < 0) & (ratio < 1 - eps_low), (adv > 0) & (ratio > 1 + eps_high)
        dual_hit = torch.zeros_like(low)
    if dual_clip is not None:
        floor = dual_clip * adv
        with torch.no_grad():
            dual_hit = (adv < 0) & (value < floor)
        value = torch.where(adv < 0, torch.maximum(value, floor), value)
    return Surrogate(value, low | high, dual_hit, low, high)


def cispo_surrogate(ratio: torch.Tensor, adv: torch.Tensor, logp: torch.Tensor, eps_max: float) -> Surrogate:
    """CISPO (MiniMax-M1, Chen et al. 2025), as TRL 1.16 computes it (loss_type="cispo", grpo_trainer.py
    ~line 3110): L = sg(min(ρ, ε_max))·A·log π_θ. The capped ratio is a constant weight, so every token
    keeps a gradient, sg(min(ρ, ε_max))·A; ε_max is clip_epsilon_high as an absolute bound on ρ (not
    1 + ε). No lower bound and no dual clip. (verl's cispo clamps ρ to [1−clip_ratio_low,
    1+clip_ratio_high]: the same with clip_ratio_high = ε_max − 1 and a lower bound that cannot bind.)"""
    value = ratio.clamp(max=eps_max).detach() * adv * logp
    with torch.no_grad():
        high = (ratio > eps_max) & (adv > 0)
        low = torch.zeros_like(high)
    return Surrogate(value, high, low.clone(), low, high)


def policy_surrogate(policy_loss: str, ratio: torch.Tensor, adv: torch.Tensor, logp: torch.Tensor,
                     eps_low: float, eps_high: float, dual_clip: float | None) -> Surrogate:
    if policy_loss == "clip":
        return clipped_surrogate(ratio, adv, eps_low, eps_high, dual_clip)
    if policy_loss == "cispo":
        return cispo_surrogate(ratio, adv, logp, eps_high)
    raise ValueError(f"unknown policy_loss {policy_loss!r}")


@dataclass(frozen=True)
class ISWeights:
    value: torch.Tensor  # (G, T) the weight each token's policy term is multiplied by, 0 on padding
    bound_hit: torch.Tensor  # (G, T) bool: truncated, or masked to 0


IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def is_weights(logp_old: torch.Tensor, logp_sampling: torch.Tensor, mask: torch.Tensor, mode: str,
               clip_min: float | None, clip_max: float | None) -> ISWeights:
    """TRL's vLLM importance-sampling correction (grpo_trainer.py ~lines 2660-2705): the trainer's π_old
    over the rollout engine's π_sampling, exp(log π_old − log π_sampling) per token, or exp of its sum
    over the completion (sequence_*). *_truncate clamps it to [clip_min, clip_max]; *_mask sets it to 0
    outside. A constant: the policy term of each token is multiplied by it, the KL term is not."""
    if mode not in IS_MODES:
        raise ValueError(f"unknown is_correction {mode!r}")
    with torch.no_grad():
        diff = torch.nan_to_num((logp_old - logp_sampling) * mask, nan=0.0)  # NaN: no sampling log-prob, weight 1
        if mode.startswith("sequence"):
            diff = diff.sum(dim=-1, keepdim=True)
        ratio = torch.exp(diff)
        low = ratio < clip_min if clip_min is not None else torch.zeros_like(ratio, dtype=torch.bool)
        high = ratio > clip_max if clip_max is not None else torch.zeros_like(ratio, dtype=torch.bool)
        if mode.endswith("truncate"):
            weight = torch.clamp(ratio, min=clip_min, max=clip_max)
        else:
            weight = ratio.masked_fill(low | high, 0.0)
        on = mask.bool()
        return ISWeights(weight.expand_as(mask) * mask, (low | high).expand_as(on) & on)


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
