"""Rotary position embeddings (RoPE) in HF's "rotate_half" convention: a head's channel i pairs with i + D/2,
each pair turned by its position's angle. Shapes: B batch, T tokens, H heads, D one head's width.

GGUF files store Q and K rows permuted for llama.cpp's interleaved pairs (2i, 2i + 1); the loader
(gguf_file.py) puts them back for llama files, so this is the stack's one convention."""
from __future__ import annotations

import torch
from torch import nn


def rope_inverse_frequencies(head_dim: int, theta: float,
                             factors: tuple[float, ...] | None = None) -> torch.Tensor:
    """θ^(-2i/D) for i = 0 .. D/2 - 1: the angle per position of each channel pair. [D/2], float32.

    `factors` [D/2] divide them, as llama.cpp's `rope_freqs` (ggml_rope_ext's freq_factors) and
    transformers' "llama3" rope (`_compute_llama3_parameters`: inv_freq / factor on the low frequencies,
    a smooth blend between) do; None leaves them untouched, bit for bit."""
    inverse = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # [D/2]
    if factors is None:
        return inverse
    return inverse / torch.tensor(factors, dtype=torch.float32)  # [D/2]


def rope_cos_sin(positions: torch.Tensor, inverse_frequencies: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position · frequency, each frequency twice (channel i and i + D/2 share one)."""
    # positions: [B, T] (int), inverse_frequencies: [D/2]
    angles = positions.float()[..., None] * inverse_frequencies  # [B, T, D/2]
    angles = torch.cat((angles, angles), dim=-1)  # [B, T, D]
    return angles.cos()[:, None], angles.sin()[:, None]  # each [B, 1, T, D], broadcast over heads


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x₁, x₂) -> (-x₂, x₁) on a head's two halves: the 90° turn of every channel pair."""
    first, second = x.chunk(2, dim=-1)  # each [..., D/2]
    return torch.cat((-second, first), dim=-1)  # [..., D]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn each channel pair (i, i + D/2) of every head by its position's angle."""
    # x: [B, H, T, D], cos/sin: [B, 1, T, D]
    return x * cos + rotate_half(x) * sin  # [B, H, T, D]


class RotaryEmbedding(nn.Module):
    """RoPE: each query and key turned by its position's angles (no weights). A module of its own so
    the graph shows it as one node between q, k and the attention scores."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # q: [B, H, T, D], k: [B, K, T, D]; cos/sin: [B, 1, T, D]
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin)
