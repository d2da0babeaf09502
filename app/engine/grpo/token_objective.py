"""The token-level GRPO objective as one nn.Module, shared by every kind whose policy is a language
model: three scorers of the same model (`policy`, frozen `old_policy`
and `reference_policy`, each ending in `token_logprobs`), then the GRPO head's `advantages`,
`ratio`, `clipped` and `divergence` (elementwise, so they take (G, T) tensors unchanged) and an
`aggregate` module for the loss over tokens. Submodules are named as the walkthroughs' nodes; the
exported graph's op nodes are named after the subclass (neg@<subclass>#0), which only supplies
the scorers. The arithmetic is token_step.token_grpo_step's, step for step (a test holds them equal).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.engine.grpo import objective as conv
from app.engine.grpo.gradient_parts import split_loss
from app.engine.grpo.head import ClippedSurrogate, GroupAdvantages, PolicyRatio, ReferencePenalty
from app.engine.grpo.params import Conventions

STATEMENT_MODULES = frozenset({"ratio", "clipped"})  # drawn with one Python statement each


class TokenLogProbs(nn.Module):
    """log π(o_t | q, o_<t): the log-softmax of each position's logits over `temperature`, read at the token
    that came next.

    The temperature is the sampler's, as TRL and verl score: TRL 1.16.0's GRPOTrainer._get_per_token_logps_
    and_entropies reads the log-probs from the fused LM head GRPOTrainer.__init__ adds with
    `add_fused_lm_head(model, temperature=self.temperature)` (trl/trainer/grpo_trainer.py ~line 1068), whose
    kernel scales each logit by `inv_t = 1 / temperature` (trl/kernels/chunked_logprob.py ~line 335); verl's
    actor does `logits.div_(temperature)`. So log π_old is the log-prob of the distribution the tokens were
    drawn from. 1.0 (the default) divides nothing: a caller that gives no temperature gets what it had. The module is
    one leaf of the traced graph, so the division adds no node to it."""

    def __init__(self, temperature: float = 1.0):
        super().__init__()
        self.temperature = float(temperature)

    def pick(self, logits: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
        """logits (G, n, V), next_ids (G, n) -> log-softmax(logits / temperature) read at next_ids (G, n)."""
        if self.temperature != 1.0:
            logits = logits / self.temperature  # not in place: the LM head's recorded value stays its own
        return F.log_softmax(logits, dim=-1).gather(-1, next_ids.unsqueeze(-1)).squeeze(-1)

    def forward(self, logits: torch.Tensor, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
        picked = self.pick(logits, ids[:, 1:])  # (G, L-1)
        return picked[:, prompt_length - 1:]  # (G, T): completion tokens only


class LossAggregation(nn.Module):
    """J = Σ w·(per-token objective): the weights are the aggregation's (sample_mean, token_mean, token_sum_norm)."""

    def __init__(self, mode: str, max_length: int):
        super().__init__()
        self.mode, self.max_length = mode, max_length

    def forward(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return conv.aggregate(per_token, mask, self.mode, self.max_length)


class TokenGRPO(nn.Module):
    """The objective over three scorers: ids (G, P + T), prompt_length -> log pi of each completion token (G, T)."""

    def __init__(self, conventions: Conventions, policy: nn.Module, old_policy: nn.Module,
                 reference_policy: nn.Module):
        super().__init__()
        self.conventions = c = conventions
        self.policy = policy
        self.old_policy = old_policy
        self.reference_policy = reference_policy
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
        loss = torch.neg(objective)  # neg@<subclass>#0, the graph's last node
        flags = self.clipped.last
        assert flags is not None
        on = mask.bool()
        return {"logp": logp, "logp_old": logp_old, "logp_ref": logp_ref, "reward_used": reward_used,
                "advantages": advantages, "ratio": ratio, "surrogate": surrogate, "kl": kl, "kl_term": kl_term,
                "per_token": per_token, "objective": objective, "loss": loss,
                "weights": conv.aggregation_weights(mask, c.loss_aggregation, c.max_length),
                "clip_active": flags.clip_active & on, "dual_clip_hit": flags.dual_clip_hit & on,
                "clip_low": flags.clip_low & on, "clip_high": flags.clip_high & on, "loss_parts": parts}
