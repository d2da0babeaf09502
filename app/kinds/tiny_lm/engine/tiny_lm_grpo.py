"""The token-level GRPO objective around the tiny LM, as one nn.Module: what the tiny-LM
walkthrough's graph is exported from and what its step is recorded on.

Submodules are named as the walkthrough's nodes: three copies of the language model
(`policy`, frozen `old_policy` and `reference_policy`), each ending in `token_logprobs`
(log π of each completion token), then the toy's own `advantages`, `ratio`, `clipped` and
`divergence` modules, which work elementwise and so take (G, T) tensors unchanged, and an
`aggregate` module for the loss over tokens. The arithmetic is token_grpo.token_grpo_step's,
step for step (a test holds them equal), written as modules so every part is a node.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.engine.grpo import objective as conv
from app.engine.grpo.gradient_parts import split_loss
from app.engine.grpo.head import ClippedSurrogate, GroupAdvantages, PolicyRatio, ReferencePenalty
from app.engine.grpo.params import Conventions
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM, TinyLMConfig

STATEMENT_MODULES = frozenset({"ratio", "clipped"})  # drawn with one Python statement, as the toy's


class TokenLogProbs(nn.Module):
    """log π(o_t | q, o_<t): the log-softmax of each position's logits, read at the token that came next."""

    def forward(self, logits: torch.Tensor, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
        logprobs = F.log_softmax(logits, dim=-1)  # (G, L-1, V)
        picked = logprobs.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # (G, L-1)
        return picked[:, prompt_length - 1:]  # (G, T): completion tokens only


class ScoredLM(TinyLM):
    """The tiny LM with its completion scorer: ids (G, P + T) -> per-token log-probs (G, T).
    Its state dict is TinyLM's (the scorer has no weights), so any TinyLM checkpoint loads."""

    def __init__(self, cfg: TinyLMConfig | None = None):
        super().__init__(cfg)
        self.token_logprobs = TokenLogProbs()

    def forward(self, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:  # type: ignore[override]
        return self.token_logprobs(super().forward(ids[:, :-1]), ids, prompt_length)


class LossAggregation(nn.Module):
    """J = Σ w·(per-token objective): the weights are the aggregation's (sample_mean, token_mean, token_sum_norm)."""

    def __init__(self, mode: str, max_length: int):
        super().__init__()
        self.mode, self.max_length = mode, max_length

    def forward(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return conv.aggregate(per_token, mask, self.mode, self.max_length)


class TinyLMGRPO(nn.Module):
    def __init__(self, conventions: Conventions | None = None, cfg: TinyLMConfig | None = None):
        super().__init__()
        self.conventions = c = conventions or Conventions()
        self.policy = ScoredLM(cfg)
        self.old_policy = ScoredLM(cfg)
        self.reference_policy = ScoredLM(cfg)
        self.advantages = GroupAdvantages(c.advantage_std, c.advantage_epsilon)
        self.ratio = PolicyRatio(c.log_ratio_clamp, c.importance_sampling_level)
        self.clipped = ClippedSurrogate(c.clip_epsilon, c.clip_epsilon_high, c.dual_clip, c.policy_loss)
        self.divergence = ReferencePenalty(c.kl_estimator, c.log_ratio_clamp, c.kl_clamp)
        self.aggregate = LossAggregation(c.loss_aggregation, c.max_length)
        for frozen in (self.old_policy, self.reference_policy):
            frozen.requires_grad_(False)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, rewards: torch.Tensor, prompt_length: int) -> dict:
        """ids (G, P + T) prompt then right-padded completions; mask (G, T) 0/1; rewards (G,)."""
        c = self.conventions
        mask = mask.to(rewards.dtype)
        logp = self.policy(ids, prompt_length)  # (G, T)
        logp_old = self.old_policy(ids, prompt_length)
        logp_ref = self.reference_policy(ids, prompt_length)
        if c.kl_placement == "reward":  # verl's apply_kl_penalty: the sampling policy's KL, summed into r
            kl = self.divergence(logp_old, logp_ref) * mask
            reward_used = rewards - c.beta * kl.sum(-1)
            kl_term = kl * 0
        else:
            kl = self.divergence(logp, logp_ref) * mask
            reward_used = rewards
            kl_term = kl
        advantages = self.advantages(reward_used)  # (G,)
        # the mask reaches the ratio only per sequence (GSPO), log pi the surrogate only for cispo: the
        # default graph (the shipped walkthrough's) keeps its edges
        sequence = (mask,) if c.importance_sampling_level == "sequence" else ()
        ratio = self.ratio(logp, logp_old, *sequence) * mask  # (G, T)
        cispo = (logp,) if c.policy_loss == "cispo" else ()
        surrogate = self.clipped(ratio, advantages.unsqueeze(-1) * mask, *cispo) * mask
        if c.kl_bias_correction and c.kl_placement == "loss":
            kl_term = kl * ratio
        per_token = (surrogate - c.beta * kl_term) * mask
        objective = self.aggregate(per_token, mask)
        # loss = surrogate part + KL part under the same aggregation (engine/grpo/gradient_parts.py)
        # The module's own function, not the module: a second call of `self.aggregate` would overwrite the
        # recorded `aggregate` node (its value and gradient) with a part's.
        agg = self.aggregate
        parts = split_loss(surrogate, kl_term * mask, c.beta,
                           lambda x: conv.aggregate(x, mask, agg.mode, agg.max_length))
        loss = torch.neg(objective)  # neg@TinyLMGRPO#0, the graph's last node
        flags = self.clipped.last
        assert flags is not None
        on = mask.bool()
        return {"logp": logp, "logp_old": logp_old, "logp_ref": logp_ref, "reward_used": reward_used,
                "advantages": advantages, "ratio": ratio, "surrogate": surrogate, "kl": kl, "kl_term": kl_term,
                "per_token": per_token, "objective": objective, "loss": loss,
                "weights": conv.aggregation_weights(mask, c.loss_aggregation, c.max_length),
                "clip_active": flags.clip_active & on, "dual_clip_hit": flags.dual_clip_hit & on,
                "clip_low": flags.clip_low & on, "clip_high": flags.clip_high & on, "loss_parts": parts}


def build_tiny_lm_grpo(policy: TinyLM, old: TinyLM, reference: TinyLM, conventions: Conventions) -> TinyLMGRPO:
    """The objective over three given models' weights (copied in; the callers' models are untouched)."""
    model = TinyLMGRPO(conventions, policy.cfg).to(next(policy.parameters()).dtype)
    model.policy.load_state_dict(policy.state_dict())
    model.old_policy.load_state_dict(old.state_dict())
    model.reference_policy.load_state_dict(reference.state_dict())
    return model
