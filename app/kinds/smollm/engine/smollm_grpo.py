"""The token-level GRPO objective around the real model (SmolLM2-135M-Instruct, app/engine/lm/decoder.py),
as one nn.Module: what the kind's graph is exported from and what its step is recorded on.

The shared TokenGRPO (app/engine/grpo/token_objective.py), the same head as the tiny LM's, with three
scorers of the Llama, each reading its log-probs from logits / the sampling temperature (TRL's and verl's
convention, TokenLogProbs): `policy` (updated), frozen `old_policy` (the model that sampled the group) and
`reference_policy` (the checkpoint). At a walkthrough's first step the old policy and the reference
are both the checkpoint: they share its tensors (`share_weights`), so the three copies cost two
models' memory (2 x 538 MB in float32), not three.
"""
from __future__ import annotations

from typing import cast

import torch

from app.engine.grpo.params import Conventions
from app.engine.grpo.token_objective import TokenGRPO
from app.engine.lm.decoder import Decoder, DecoderConfig
from app.engine.lm.scored import ScoredDecoder, share_weights


class SmolLMGRPO(TokenGRPO):
    """The objective over three scorers of one Llama configuration, all three at the sampling temperature."""

    def __init__(self, cfg: DecoderConfig, conventions: Conventions | None = None, temperature: float = 1.0):
        super().__init__(conventions or Conventions(), ScoredDecoder(cfg, temperature),
                         ScoredDecoder(cfg, temperature), ScoredDecoder(cfg, temperature))


def build_smollm_grpo(model: Decoder, conventions: Conventions, *, old: Decoder | None = None,
                      temperature: float = 1.0) -> SmolLMGRPO:
    """The objective with the policy a copy of `model` (trained), the reference `model`'s own tensors,
    and the old policy `old`'s (default: the reference's). The callers' models are untouched."""
    weight = next(model.parameters())
    # Built on the meta device, then given memory: a random init of three copies (3.5 s on the 135M model)
    # would be overwritten at once. The policy's tensors are then loaded, the two frozen copies share the
    # callers' and the one buffer, RoPE's frequencies (not in a state dict), is computed again.
    with torch.device("meta"):
        grpo = SmolLMGRPO(model.cfg, conventions, temperature)
    grpo = grpo.to_empty(device=weight.device).to(weight.dtype)
    policy = cast(Decoder, grpo.policy)
    if model.cfg.tie_embeddings:  # to_empty gives each module a tensor of its own: tie the head again
        policy.lm_head.weight = policy.embed.weight
    grpo.policy.load_state_dict(model.state_dict())
    share_weights(grpo.reference_policy, model)
    share_weights(grpo.old_policy, old if old is not None else model)
    for copy in (grpo.policy, grpo.old_policy, grpo.reference_policy):
        copy.inverse_frequencies = model.inverse_frequencies.clone()
    return grpo
