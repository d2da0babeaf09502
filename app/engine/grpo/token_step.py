"""The GRPO objective at token level: completions of different lengths, padded and
masked, every convention of `Conventions` applied per token.

The same functions as the one-token step (engine/grpo/objective.py), so the two can never
disagree about a convention: here each completion's advantage is broadcast to its tokens, and
ratio, clip and KL are per token (the ratio per completion at importance_sampling_level=sequence).
Inputs are per-token log-probs, so any policy can feed it; a recorded run can bring its own
advantages and its rollout engine's log-probs (for the IS correction).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from app.engine.grpo import objective as conv
from app.engine.grpo.gradient_parts import LossParts, split_loss
from app.engine.grpo.params import Conventions

NO_SAMPLING_LOGPS = ("is_correction={mode} needs the rollout engine's log-probs (logp_sampling), and this step "
                     "has none: π_old sampled the group itself, so every weight is 1")


@dataclass(frozen=True)
class TokenStep:
    """Every per-token tensor is (G, T) and 0 on padding; per-completion ones are (G,)."""
    reward_used: torch.Tensor  # (G,) r, or r − β·Σ_t KL_t(π_old) with the KL in the reward
    advantages: torch.Tensor  # (G,) computed from reward_used, or the ones given
    ratio: torch.Tensor  # (G, T) ρ per token, or the completion's sequence ratio on each of its tokens
    surrogate: torch.Tensor  # (G, T) L (clip: min(ρA, clip(ρ)A); cispo: sg(min(ρ, ε_high))·A·log π)
    kl: torch.Tensor  # (G, T) the estimate (of π_θ in the loss, of π_old in the reward)
    kl_term: torch.Tensor  # (G, T) what β multiplies in the loss: KL, KL·ρ, or 0
    per_token: torch.Tensor  # (G, T) L·is_weight − β·kl_term
    policy_term: torch.Tensor  # (G, T) L·is_weight: per_token's surrogate addend (kl_term is the other)
    weights: torch.Tensor  # (G, T) w: loss = −Σ w·per_token
    objective: torch.Tensor  # J
    loss: torch.Tensor  # −J
    clip_active: torch.Tensor  # (G, T) bool: clip_low | clip_high
    dual_clip_hit: torch.Tensor  # (G, T) bool
    is_weight: torch.Tensor  # (G, T) the IS correction's weight: 1 on every real token without one
    clip_low: torch.Tensor  # (G, T) bool, as TRL logs clip_ratio/low: ρ < 1−ε_low and A < 0 (never, for cispo)
    clip_high: torch.Tensor  # (G, T) bool, clip_ratio/high: ρ > 1+ε_high and A > 0 (cispo: ρ > ε_high, A > 0)
    is_bound_hit: torch.Tensor  # (G, T) bool: the IS weight was truncated or masked to 0
    is_correction_skipped: str | None = None  # why an is_correction asked for was not applied


def token_grpo_step(logp: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor, rewards: torch.Tensor,
                    mask: torch.Tensor, c: Conventions, *, logp_sampling: torch.Tensor | None = None,
                    advantages: torch.Tensor | None = None) -> TokenStep:
    """logp (G, T) with its gradient; logp_old, logp_ref (G, T) constants; rewards (G,); mask (G, T) 0/1.
    `logp_sampling` (G, T): the rollout engine's log-probs, for c.is_correction; `advantages` (G,): use
    these (a recorded run's own) instead of computing them from the rewards."""
    mask = mask.to(logp.dtype)
    on = mask.bool()
    if c.kl_placement == "reward":
        # verl's apply_kl_penalty: a per-token penalty from the sampling policy, summed into the
        # sequence's reward before the group statistics.
        kl = conv.kl_estimate(logp_old, logp_ref, c.kl_estimator, c.log_ratio_clamp, c.kl_clamp).value * mask
        reward_used = rewards - c.beta * kl.sum(-1)
    else:
        kl = conv.kl_estimate(logp, logp_ref, c.kl_estimator, c.log_ratio_clamp, c.kl_clamp).value * mask
        reward_used = rewards
    if advantages is None:
        advantages = conv.group_advantages(reward_used, c.advantage_std, c.advantage_epsilon)
    else:
        advantages = advantages.detach().to(dtype=logp.dtype, device=logp.device)
    log_ratio, _ = conv.policy_log_ratio(logp, logp_old, mask, c.importance_sampling_level, c.log_ratio_clamp)
    ratio = torch.exp(log_ratio) * mask
    surrogate = conv.policy_surrogate(c.policy_loss, ratio, advantages.unsqueeze(-1) * mask, logp, c.clip_epsilon,
                                      c.clip_epsilon_high, c.dual_clip)
    skipped = None
    if c.is_correction == "none":
        weight = conv.ISWeights(mask.clone(), torch.zeros_like(on))
    elif logp_sampling is None:
        weight, skipped = conv.ISWeights(mask.clone(), torch.zeros_like(on)), NO_SAMPLING_LOGPS.format(
            mode=c.is_correction)
    else:
        weight = conv.is_weights(logp_old.detach(), logp_sampling.detach().to(logp.dtype), mask, c.is_correction,
                                 c.is_clip_min, c.is_clip_max)
    if c.kl_placement == "reward":
        kl_term = torch.zeros_like(kl)
    else:
        kl_term = kl * ratio if c.kl_bias_correction else kl
    policy_term = surrogate.value if c.is_correction == "none" else surrogate.value * weight.value
    per_token = (policy_term - c.beta * kl_term) * mask
    objective = conv.aggregate(per_token, mask, c.loss_aggregation, c.max_length)
    return TokenStep(reward_used, advantages, ratio, surrogate.value * mask, kl, kl_term, per_token, policy_term * mask,
                     conv.aggregation_weights(mask, c.loss_aggregation, c.max_length), objective, -objective,
                     surrogate.clip_active & on, surrogate.dual_clip_hit & on, weight.value,
                     surrogate.clip_low & on, surrogate.clip_high & on, weight.bound_hit, skipped)


def token_loss_parts(step: TokenStep, mask: torch.Tensor, c: Conventions,
                     reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> LossParts:
    """The step's loss as its surrogate and KL addends (engine/grpo/gradient_parts.py), under the
    aggregation in force, or `reduce` where the loss was aggregated otherwise (a record's global token count)."""
    mask = mask.to(step.per_token.dtype)
    if reduce is None:
        def reduce(x: torch.Tensor) -> torch.Tensor:
            return conv.aggregate(x, mask, c.loss_aggregation, c.max_length)
    return split_loss(step.policy_term, step.kl_term * mask, c.beta, reduce)
