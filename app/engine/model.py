"""ToyGRPO: one GRPO objective for a four-choice policy, as plain torch modules.

The math is GRPO as defined in DeepSeekMath (Shao et al. 2024, §4.1.1, eq. 3-4)
and used for DeepSeek-R1 (§2.2.1), for one prompt q and a group of G sampled
completions o_i (here: one of four choices):

    A_i = (r_i - mean(r)) / (std(r) + eps)                  # population std
    rho_i = pi_theta(o_i|q) / pi_old(o_i|q)
    L_i = min(rho_i * A_i, clip(rho_i, 1-e, 1+e) * A_i)
    D_i = exp(logp_ref - logp) - (logp_ref - logp) - 1      # k3 estimator, >= 0
    J = mean_i(L_i - beta * D_i);  loss = -J

Submodules are named exactly as the nodes of the user's `tensorviz.graph`
export (`policy`, `old_policy`, `reference_policy`, `advantages`, `ratio`,
`clipped`, `divergence`) so recorded tensors map onto the drawn graph 1:1.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

DTYPE = torch.float64  # the one dtype of every tensor: tiny tensors, exact-enough numbers matter more than speed


@dataclass(frozen=True)
class ToyConfig:
    n_features: int = 3  # a prompt is a feature vector of this size
    n_choices: int = 4  # a "completion" is one of this many choices
    clip_epsilon: float = 0.2  # e in clip(rho, 1-e, 1+e); 0.2 in TRL and verl
    beta: float = 0.04  # weight of the reference penalty; 0.04 in DeepSeekMath
    advantage_epsilon: float = 1e-4  # keeps A finite when std(r) = 0 (TRL's 1e-4)


class CompletionPolicy(nn.Module):
    """pi(choice | prompt): Linear(3, 4) logits, then log-probabilities.

    With `bottleneck=k` the logits go through a width-k layer first: the
    distillation path's smaller student (k=1: 11 parameters instead of 16).
    """

    def __init__(self, cfg: ToyConfig, bottleneck: int | None = None):
        super().__init__()
        self.logits: nn.Module
        if bottleneck is None:
            self.logits = nn.Linear(cfg.n_features, cfg.n_choices)
        else:
            self.logits = nn.Sequential(nn.Linear(cfg.n_features, bottleneck, bias=False),
                                        nn.Linear(bottleneck, cfg.n_choices))
        self.log_probabilities = nn.LogSoftmax(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (1, F) -> (1, C)
        return self.log_probabilities(self.logits(x))


class GroupAdvantages(nn.Module):
    """Group-relative baseline: no critic, the group's own mean and spread."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, rewards: torch.Tensor) -> torch.Tensor:  # (G,) -> (G,)
        # Population std (unbiased=False): an equal-reward group gives exactly 0.
        std = rewards.std(unbiased=False)
        return (rewards - rewards.mean()) / (std + self.eps)


class PolicyRatio(nn.Module):
    """rho_i = exp(log pi_theta - log pi_old), computed in log space for stability."""

    def forward(self, logp: torch.Tensor, logp_old: torch.Tensor) -> torch.Tensor:
        return torch.exp(logp - logp_old)  # (G,)


class ClippedSurrogate(nn.Module):
    """min(rho*A, clip(rho)*A): pessimistic bound, saturates once rho leaves the band."""

    def __init__(self, clip_epsilon: float):
        super().__init__()
        self.clip_epsilon = clip_epsilon

    def forward(self, ratio: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
        unclipped = ratio * advantages  # (G,)
        clipped = torch.clamp(ratio, 1 - self.clip_epsilon, 1 + self.clip_epsilon) * advantages
        return torch.minimum(unclipped, clipped)  # (G,)


class ReferencePenalty(nn.Module):
    """k3 estimate of KL(pi_theta || pi_ref) per sample (Schulman 2020); always >= 0."""

    def forward(self, logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
        log_ratio = logp_ref - logp  # (G,)
        return torch.exp(log_ratio) - log_ratio - 1


class ToyGRPO(nn.Module):
    """The whole objective. `old_policy` and `reference_policy` are frozen copies."""

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.policy = CompletionPolicy(cfg)
        self.old_policy = CompletionPolicy(cfg)
        self.reference_policy = CompletionPolicy(cfg)
        self.advantages = GroupAdvantages(cfg.advantage_epsilon)
        self.ratio = PolicyRatio()
        self.clipped = ClippedSurrogate(cfg.clip_epsilon)
        self.divergence = ReferencePenalty()
        for frozen in (self.old_policy, self.reference_policy):
            frozen.requires_grad_(False)

    def forward(self, x: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor) -> dict:
        """x: (1, F) prompt; actions: (G,) sampled choices; rewards: (G,)."""
        logprobs = self.policy(x)  # (1, C)
        # Frozen copies see a detached input so no gradient can reach them.
        logprobs_old = self.old_policy(x.detach())  # (1, C)
        logprobs_ref = self.reference_policy(x.detach())  # (1, C)
        logp = logprobs[0, actions]  # (G,) log pi_theta(o_i | q)
        logp_old = logprobs_old[0, actions]  # (G,)
        logp_ref = logprobs_ref[0, actions]  # (G,)

        advantages = self.advantages(rewards)  # (G,)
        ratio = self.ratio(logp, logp_old)  # (G,)
        surrogate = self.clipped(ratio, advantages)  # (G,)
        divergence = self.divergence(logp, logp_ref)  # (G,)
        per_sample = torch.sub(surrogate, self.cfg.beta * divergence)  # (G,) sub@ToyGRPO#0
        objective = per_sample.mean()  # J
        loss = -objective
        return {
            "logp": logp, "logp_old": logp_old, "logp_ref": logp_ref,
            "advantages": advantages, "ratio": ratio, "surrogate": surrogate,
            "divergence": divergence, "per_sample": per_sample,
            "objective": objective, "loss": loss,
        }
