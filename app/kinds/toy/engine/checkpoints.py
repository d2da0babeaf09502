"""Base checkpoints: the fixed weights every run starts from.

Drawn from private generators with fixed seeds, like a pretrained base model;
a request's seed only drives sampling.
"""
from __future__ import annotations

import torch

from app.engine.grpo.head import DTYPE

BASE_SEED = 20250122  # DeepSeek-R1's release date: any fixed value would do


def student_base_state(bottleneck: int = 1, n_features: int = 3, n_choices: int = 4,
                       dtype=DTYPE) -> dict[str, torch.Tensor]:
    """The distillation student's own starting weights (a smaller, separately initialised model)."""
    gen = torch.Generator().manual_seed(BASE_SEED + 1)
    return {
        "logits.0.weight": torch.randn(bottleneck, n_features, generator=gen, dtype=dtype) * 0.5,
        "logits.1.weight": torch.randn(n_choices, bottleneck, generator=gen, dtype=dtype) * 0.5,
        "logits.1.bias": torch.randn(n_choices, generator=gen, dtype=dtype) * 0.1,
    }


def base_state(n_features: int = 3, n_choices: int = 4, dtype=DTYPE) -> dict[str, torch.Tensor]:
    """Weights of the base checkpoint, drawn from a private generator (never the global RNG)."""
    gen = torch.Generator().manual_seed(BASE_SEED)
    return {
        "logits.weight": torch.randn(n_choices, n_features, generator=gen, dtype=dtype) * 0.5,
        "logits.bias": torch.randn(n_choices, generator=gen, dtype=dtype) * 0.1,
    }
