"""Sampling a group of completions from the tiny LM: G continuations of one prompt,
token by token, each stopping at <end> or after `max_new` tokens, padded and masked.

The run's own CPU generator draws every token (never the global RNG), so a group depends only
on (model, prompt, G, seed), on any device.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from app.kinds.tiny_lm.domain.arith_task import END, PAD, TOKEN_ID, decode
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM


@dataclass(frozen=True)
class Group:
    ids: torch.Tensor  # (G, P + T): the prompt, then each completion right-padded with <pad>
    mask: torch.Tensor  # (G, T) 1 on a completion's real tokens (its <end> included), 0 on padding
    prompt_length: int

    @property
    def completions(self) -> list[str]:
        rows = self.ids[:, self.prompt_length:]
        return [decode([int(t) for t, m in zip(row, keep, strict=True) if m])
                for row, keep in zip(rows, self.mask, strict=True)]


@torch.no_grad()
def sample_group(model: TinyLM, prompt_ids: list[int], group_size: int, max_new: int, seed: int,
                 temperature: float = 1.0) -> Group:
    if len(prompt_ids) + max_new > model.cfg.block_size + 1:
        raise ValueError(f"prompt {len(prompt_ids)} + {max_new} new tokens exceed the model's context")
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    ids = torch.tensor([prompt_ids] * group_size, device=device)
    done = torch.zeros(group_size, dtype=torch.bool, device=device)
    mask = torch.zeros(group_size, max_new, device=device)
    for t in range(max_new):
        logits = model(ids)[:, -1] / temperature
        logits[:, TOKEN_ID[PAD]] = float("-inf")  # padding is layout, never a token to say
        probs = torch.softmax(logits.double(), dim=-1).cpu()
        token = torch.multinomial(probs, 1, generator=gen).squeeze(-1).to(device)
        token = torch.where(done, torch.full_like(token, TOKEN_ID[PAD]), token)
        mask[:, t] = (~done).to(mask.dtype)
        ids = torch.cat([ids, token.unsqueeze(-1)], dim=1)
        done |= token == TOKEN_ID[END]
        if bool(done.all()):
            mask = mask[:, :t + 1]
            break
    return Group(ids, mask, len(prompt_ids))
