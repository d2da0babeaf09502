"""The token-level GRPO objective around the tiny LM, as one nn.Module: what the tiny-LM
walkthrough's graph is exported from and what its step is recorded on.

Submodules are named as the walkthrough's nodes: three copies of the language model
(`policy`, frozen `old_policy` and `reference_policy`), each ending in `token_logprobs`
(log π of each completion token), then the toy's own `advantages`, `ratio`, `clipped` and
`divergence` modules, which work elementwise and so take (G, T) tensors unchanged, and an
`aggregate` module for the loss over tokens: the shared TokenGRPO (app/engine/grpo/token_objective.py)
with ScoredLM as its scorers. The arithmetic is token_grpo.token_grpo_step's,
step for step (a test holds them equal), written as modules so every part is a node.
"""
from __future__ import annotations

import torch

from app.engine.grpo.params import Conventions
from app.engine.grpo.token_objective import STATEMENT_MODULES, LossAggregation, TokenGRPO, TokenLogProbs
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM, TinyLMConfig

__all__ = ["STATEMENT_MODULES", "LossAggregation", "ScoredLM", "TinyLMGRPO", "TokenLogProbs", "build_tiny_lm_grpo"]


class ScoredLM(TinyLM):
    """The tiny LM with its completion scorer: ids (G, P + T) -> per-token log-probs (G, T).
    Its state dict is TinyLM's (the scorer has no weights), so any TinyLM checkpoint loads."""

    def __init__(self, cfg: TinyLMConfig | None = None):
        super().__init__(cfg)
        self.token_logprobs = TokenLogProbs()

    def forward(self, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:  # type: ignore[override]
        return self.token_logprobs(super().forward(ids[:, :-1]), ids, prompt_length)


class TinyLMGRPO(TokenGRPO):
    """The objective over three copies of the tiny LM (app/engine/grpo/token_objective.py)."""

    def __init__(self, conventions: Conventions | None = None, cfg: TinyLMConfig | None = None):
        super().__init__(conventions or Conventions(), ScoredLM(cfg), ScoredLM(cfg), ScoredLM(cfg))


def build_tiny_lm_grpo(policy: TinyLM, old: TinyLM, reference: TinyLM, conventions: Conventions) -> TinyLMGRPO:
    """The objective over three given models' weights (copied in; the callers' models are untouched)."""
    model = TinyLMGRPO(conventions, policy.cfg).to(next(policy.parameters()).dtype)
    model.policy.load_state_dict(policy.state_dict())
    model.old_policy.load_state_dict(old.state_dict())
    model.reference_policy.load_state_dict(reference.state_dict())
    return model
