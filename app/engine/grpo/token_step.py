"""The GRPO objective at token level (issue 13): completions of different lengths, padded and
masked, every convention of `Conventions` applied per token.

The same functions as the toy's one-token step (engine/conventions.py), so the two can never
disagree about a convention: here each completion's advantage is broadcast to its tokens, and
ratio, clip and KL are per token. Inputs are per-token log-probs, so any policy can feed it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from app.engine.grpo import conventions as conv
from app.engine.grpo.params import Conventions


@dataclass(frozen=True)
class TokenStep:
    """Every per-token tensor is (G, T) and 0 on padding; per-completion ones are (G,)."""
    reward_used: torch.Tensor  # (G,) r, or r − β·Σ_t KL_t(π_old) with the KL in the reward
    advantages: torch.Tensor  # (G,)
    ratio: torch.Tensor  # (G, T)
    surrogate: torch.Tensor  # (G, T) L
    kl: torch.Tensor  # (G, T) the estimate (of π_θ in the loss, of π_old in the reward)
    kl_term: torch.Tensor  # (G, T) what β multiplies in the loss: KL, KL·ρ, or 0
    per_token: torch.Tensor  # (G, T) L − β·kl_term
    weights: torch.Tensor  # (G, T) w: loss = −Σ w·per_token
    objective: torch.Tensor  # J
    loss: torch.Tensor  # −J
    clip_active: torch.Tensor  # (G, T) bool
    dual_clip_hit: torch.Tensor  # (G, T) bool


def token_grpo_step(logp: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor, rewards: torch.Tensor,
                    mask: torch.Tensor, c: Conventions) -> TokenStep:
    """logp (G, T) with its gradient; logp_old, logp_ref (G, T) constants; rewards (G,); mask (G, T) 0/1."""
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
    advantages = conv.group_advantages(reward_used, c.advantage_std, c.advantage_epsilon)
    log_ratio, _ = conv.clamp_log_ratio(logp - logp_old, c.log_ratio_clamp)
    ratio = torch.exp(log_ratio) * mask
    surrogate = conv.clipped_surrogate(ratio, advantages.unsqueeze(-1) * mask, c.clip_epsilon,
                                       c.clip_epsilon_high, c.dual_clip)
    if c.kl_placement == "reward":
        kl_term = torch.zeros_like(kl)
    else:
        kl_term = kl * ratio if c.kl_bias_correction else kl
    per_token = (surrogate.value - c.beta * kl_term) * mask
    objective = conv.aggregate(per_token, mask, c.loss_aggregation, c.max_length)
    return TokenStep(reward_used, advantages, ratio, surrogate.value * mask, kl, kl_term, per_token,
                     conv.aggregation_weights(mask, c.loss_aggregation, c.max_length), objective, -objective,
                     surrogate.clip_active & on, surrogate.dual_clip_hit & on)
