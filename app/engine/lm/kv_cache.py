"""Which keys a query may see, and the keys and values kept between generation steps: the KV cache, each
token's position among its row's real tokens, and the causal padding mask. Shapes: B batch, T new tokens,
S the tokens a cache holds plus the new ones, K key/value heads, D one head's width."""
from __future__ import annotations

import torch


class KVCache:
    """Each block's keys (after RoPE) and values so far, so that generation feeds only the new token."""

    def __init__(self, n_layer: int):
        self.keys: list[torch.Tensor | None] = [None] * n_layer  # each [B, K, S, D]
        self.values: list[torch.Tensor | None] = [None] * n_layer  # each [B, K, S, D]

    @property
    def length(self) -> int:
        first = self.keys[0]
        return 0 if first is None else first.shape[2]

    def expand(self, batch: int) -> None:
        """A cache of one row read by `batch` rows (views, no copy): one prompt shared by a group."""
        for layer, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            if k is not None and v is not None:
                self.keys[layer], self.values[layer] = k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # k, v: [B, K, T, D] -> the cache's [B, K, S, D]
        old_k, old_v = self.keys[layer], self.values[layer]
        if old_k is not None and old_v is not None:
            k, v = torch.cat((old_k, k), dim=2), torch.cat((old_v, v), dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each token's position among its row's real tokens (0 for padding before the first)."""
    # attention_mask: [B, T] -> [B, T]
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def allowed_keys(key_mask: torch.Tensor, n_new: int) -> torch.Tensor:
    """Which key each of the last `n_new` queries may attend to: itself and earlier real tokens."""
    # key_mask: [B, S], True on real tokens; the queries are the last n_new of the S keys
    total = key_mask.shape[1]
    query_index = torch.arange(total - n_new, total, device=key_mask.device)[:, None]  # [T, 1]
    key_index = torch.arange(total, device=key_mask.device)[None, :]  # [1, S]
    causal = key_index <= query_index  # [T, S]
    itself = key_index == query_index  # [T, S]: a padding query sees itself, so no row is all -inf
    return ((causal[None] & key_mask[:, None, :]) | itself[None])[:, None]  # [B, 1, T, S]
