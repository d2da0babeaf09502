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

from dataclasses import dataclass, field

import torch
from torch import nn

from app.engine.grpo import objective as conv
from app.engine.grpo.gradient_parts import split_loss
from app.engine.grpo.head import ClippedSurrogate, GroupAdvantages, PolicyRatio, ReferencePenalty
from app.engine.grpo.params import Conventions


@dataclass(frozen=True)
class ToyConfig:
    n_features: int = 3  # a prompt is a feature vector of this size
    n_choices: int = 4  # a "completion" is one of this many choices
    # How the loss is computed (advantage std, clip band, KL estimator, aggregation...):
    # the paper's by default; TRL's, verl's, Dr. GRPO's or DAPO's by preset.
    conventions: Conventions = field(default_factory=Conventions)

    @property
    def clip_epsilon(self) -> float:
        return self.conventions.clip_epsilon

    @property
    def beta(self) -> float:
        return self.conventions.beta


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


class ToyGRPO(nn.Module):
    """The whole objective. `old_policy` and `reference_policy` are frozen copies."""

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        c = cfg.conventions
        self.policy = CompletionPolicy(cfg)
        self.old_policy = CompletionPolicy(cfg)
        self.reference_policy = CompletionPolicy(cfg)
        self.advantages = GroupAdvantages(c.advantage_std, c.advantage_epsilon)
        # one-token completions: the sequence-level ratio (GSPO) is the token's
        self.ratio = PolicyRatio(c.log_ratio_clamp, c.importance_sampling_level)
        self.clipped = ClippedSurrogate(c.clip_epsilon, c.clip_epsilon_high, c.dual_clip, c.policy_loss)
        self.divergence = ReferencePenalty(c.kl_estimator, c.log_ratio_clamp, c.kl_clamp)
        for frozen in (self.old_policy, self.reference_policy):
            frozen.requires_grad_(False)

    def forward(self, x: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor) -> dict:
        """x: (1, F) prompt; actions: (G,) sampled choices; rewards: (G,)."""
        c = self.cfg.conventions
        logprobs = self.policy(x)  # (1, C)
        # Frozen copies see a detached input so no gradient can reach them.
        logprobs_old = self.old_policy(x.detach())  # (1, C)
        logprobs_ref = self.reference_policy(x.detach())  # (1, C)
        logp = logprobs[0, actions]  # (G,) log pi_theta(o_i | q)
        logp_old = logprobs_old[0, actions]  # (G,)
        logp_ref = logprobs_ref[0, actions]  # (G,)

        if c.kl_placement == "reward":
            # PPO-style RLHF: the KL of the sampling policy is a (constant) reward penalty.
            divergence = self.divergence(logp_old, logp_ref)  # (G,)
            rewards_used = rewards - c.beta * divergence
            kl_loss_term = torch.zeros_like(divergence)
        else:
            divergence = self.divergence(logp, logp_ref)  # (G,)
            rewards_used = rewards
            kl_loss_term = divergence
        kl_estimate = self.divergence.last
        advantages = self.advantages(rewards_used)  # (G,)
        ratio = self.ratio(logp, logp_old)  # (G,)
        surrogate = self.clipped(ratio, advantages, *((logp,) if c.policy_loss == "cispo" else ()))  # (G,)
        if c.kl_bias_correction:  # TRL: k3 x rho, rho keeping its gradient
            kl_loss_term = kl_loss_term * ratio
        per_sample = torch.sub(surrogate, c.beta * kl_loss_term)  # (G,) sub@ToyGRPO#0
        mask = torch.ones_like(per_sample).unsqueeze(-1)  # one token per completion
        def reduce(x: torch.Tensor) -> torch.Tensor:
            return conv.aggregate(x, mask, c.loss_aggregation, c.max_length)
        objective = reduce(per_sample.unsqueeze(-1))  # J
        loss = -objective
        return {
            "logp": logp, "logp_old": logp_old, "logp_ref": logp_ref,
            "advantages": advantages, "ratio": ratio, "surrogate": surrogate,
            "divergence": divergence, "per_sample": per_sample,
            "objective": objective, "loss": loss,
            "reward_used": rewards_used, "kl_loss_term": kl_loss_term,
            "weights": conv.aggregation_weights(mask, c.loss_aggregation, c.max_length)[:, 0],
            "surrogate_flags": self.clipped.last, "kl_flags": kl_estimate,
            # loss = surrogate part + KL part, the same aggregation (engine/grpo/gradient_parts.py)
            "loss_parts": split_loss(surrogate.unsqueeze(-1), kl_loss_term.unsqueeze(-1), c.beta, reduce),
        }
