"""A decoder that scores completions, for any LM kind's GRPO objective: per-token log-probs of the tokens
after one shared prompt, at the sampler's temperature, and frozen copies that share a checkpoint's tensors."""
from __future__ import annotations

import torch
from torch import nn

from app.engine.grpo.token_objective import TokenLogProbs
from app.engine.lm.decoder import Decoder, DecoderConfig


class ScoredDecoder(Decoder):
    """The decoder with its completion scorer: ids (G, P + T) -> per-token log-probs (G, T). Its state dict
    is the decoder's (the scorer has no weights). Completions are right-padded after one shared prompt, so a
    causal model's real positions never see the padding: no attention mask is needed to score them.
    `temperature`: the sampler's; the log-probs are log-softmax(logits / temperature), as TRL scores them."""

    def __init__(self, cfg: DecoderConfig, temperature: float = 1.0):
        super().__init__(cfg)
        self.token_logprobs = TokenLogProbs(temperature)

    @property
    def temperature(self) -> float:
        return self.token_logprobs.temperature

    def forward(self, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:  # type: ignore[override]
        return self.token_logprobs(super().forward(ids[:, :-1]), ids, prompt_length)

    def score(self, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
        """The same log-probs (G, T) as `forward`, up to float rounding, through `completion_logits`: the
        shared prompt once, the LM head on the scored positions only. For the passes nobody records."""
        return self.token_logprobs.pick(self.completion_logits(ids, prompt_length), ids[:, prompt_length:])  # (G, T)


def share_weights(target: nn.Module, source: nn.Module) -> None:
    """Make `target` read `source`'s parameter tensors (same structure; tied weights stay tied), as
    frozen parameters of its own: two frozen copies of one checkpoint cost one, and `source` keeps
    its own Parameters (and their requires_grad). `target` must then never be trained."""
    frozen: dict[int, nn.Parameter] = {}
    for name, param in source.named_parameters(remove_duplicate=False):
        shared = frozen.setdefault(id(param), nn.Parameter(param.detach(), requires_grad=False))
        owner_name, _, leaf = name.rpartition(".")
        setattr(target.get_submodule(owner_name) if owner_name else target, leaf, shared)
