"""The GRPO head of a recorded step, as one nn.Module: what the record kind's graph is exported
from (python -m app.export --model step_record; app/kinds/step_record/graph/).

The recorded model is one node, `policy`: its log-probs are read from the record, never computed
here (the app has neither its weights nor its tokenizer). After it, the same head modules as
every kind's (app/engine/grpo/head.py): advantages, ratio, clip, KL, aggregation, loss.
"""
from __future__ import annotations

import torch
from torch import nn

from app.engine.grpo import objective as conv
from app.engine.grpo.head import ClippedSurrogate, GroupAdvantages, PolicyRatio, ReferencePenalty
from app.engine.grpo.params import Conventions

STATEMENT_MODULES = frozenset({"ratio", "clipped"})


class RecordedPolicy(nn.Module):
    """The recorded model: log π_θ of each completion token, as the framework computed it at loss time."""

    def forward(self, logp: torch.Tensor) -> torch.Tensor:
        return logp.clone()


class LossAggregation(nn.Module):
    """J = Σ w·(per-token objective), the weights the aggregation's (kinds share no code: the tiny
    LM has the same module)."""

    def __init__(self, mode: str, max_length: int):
        super().__init__()
        self.mode, self.max_length = mode, max_length

    def forward(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return conv.aggregate(per_token, mask, self.mode, self.max_length)


class RecordedGRPO(nn.Module):
    def __init__(self, conventions: Conventions | None = None):
        super().__init__()
        self.conventions = c = conventions or Conventions()
        self.policy = RecordedPolicy()
        self.advantages = GroupAdvantages(c.advantage_std, c.advantage_epsilon)
        self.ratio = PolicyRatio(c.log_ratio_clamp, c.importance_sampling_level)
        self.clipped = ClippedSurrogate(c.clip_epsilon, c.clip_epsilon_high, c.dual_clip, c.policy_loss)
        self.divergence = ReferencePenalty(c.kl_estimator, c.log_ratio_clamp, c.kl_clamp)
        self.aggregate = LossAggregation(c.loss_aggregation, c.max_length)

    def forward(self, logp: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor,
                rewards: torch.Tensor, mask: torch.Tensor) -> dict:
        c = self.conventions
        logp = self.policy(logp)
        kl = self.divergence(logp, logp_ref) * mask
        advantages = self.advantages(rewards)
        ratio = self.ratio(logp, logp_old, mask) * mask
        surrogate = self.clipped(ratio, advantages.unsqueeze(-1) * mask, logp) * mask
        per_token = (surrogate - c.beta * kl) * mask
        objective = self.aggregate(per_token, mask)
        return {"loss": torch.neg(objective)}
