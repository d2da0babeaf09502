"""The GRPO head: the modules that turn log-probabilities and rewards into the loss, shared by
every kind's model (per sample or per token). DeepSeekMath (Shao et al. 2024)
§4.1.1 eq. 3-4; the conventions (app/engine/grpo/objective.py) decide the variants.
"""
from __future__ import annotations

import torch
from torch import nn

from app.engine.grpo import objective as conv

DTYPE = torch.float64  # the one dtype of every tensor: tiny tensors, exact-enough numbers matter more than speed


class GroupAdvantages(nn.Module):
    """Group-relative baseline: no critic, the group's own mean and spread."""

    def __init__(self, std: str, eps: float):
        super().__init__()
        self.std, self.eps = std, eps

    def forward(self, rewards: torch.Tensor) -> torch.Tensor:  # (G,) -> (G,)
        return conv.group_advantages(rewards, self.std, self.eps)


class PolicyRatio(nn.Module):
    """rho_i = exp(log pi_theta - log pi_old), computed in log space (optionally clamped, as verl); at
    importance_sampling_level=sequence (GSPO) per completion, the mean over its tokens (needs the mask)."""

    def __init__(self, log_ratio_clamp: float | None = None, level: str = "token"):
        super().__init__()
        self.log_ratio_clamp, self.level = log_ratio_clamp, level

    def forward(self, logp: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        log_ratio = conv.policy_log_ratio(logp, logp_old, mask, self.level, self.log_ratio_clamp)[0]
        return torch.exp(log_ratio).expand_as(logp)  # (G,) or (G, T)


class ClippedSurrogate(nn.Module):
    """min(rho*A, clip(rho)*A): pessimistic bound, saturates once rho leaves the band. With
    policy_loss=cispo: sg(min(rho, eps_high))*A*log pi (needs log pi)."""

    def __init__(self, eps_low: float, eps_high: float | None = None, dual_clip: float | None = None,
                 policy_loss: str = "clip"):
        super().__init__()
        self.eps_low, self.eps_high, self.dual_clip = eps_low, eps_low if eps_high is None else eps_high, dual_clip
        self.policy_loss = policy_loss
        self.last: conv.Surrogate | None = None  # which clips bound, for the samples table

    def forward(self, ratio: torch.Tensor, advantages: torch.Tensor, logp: torch.Tensor | None = None) -> torch.Tensor:
        if self.policy_loss != "clip" and logp is None:
            raise ValueError(f"policy_loss={self.policy_loss} needs log pi")
        self.last = conv.policy_surrogate(self.policy_loss, ratio, advantages, ratio if logp is None else logp,
                                          self.eps_low, self.eps_high, self.dual_clip)
        return self.last.value  # (G,)


class ReferencePenalty(nn.Module):
    """KL(pi_theta || pi_ref) per sample by Schulman's k1/k2/k3 estimator (k3 >= 0)."""

    def __init__(self, estimator: str = "k3", log_ratio_clamp: float | None = None, kl_clamp: float | None = None):
        super().__init__()
        self.estimator, self.log_ratio_clamp, self.kl_clamp = estimator, log_ratio_clamp, kl_clamp
        self.last: conv.KLEstimate | None = None

    def forward(self, logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
        self.last = conv.kl_estimate(logp, logp_ref, self.estimator, self.log_ratio_clamp, self.kl_clamp)
        return self.last.value
