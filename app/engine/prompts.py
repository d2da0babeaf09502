"""The toy's prompts and its base checkpoint.

A prompt is a 3-feature vector with one correct choice out of four, so that
"accuracy" means something. The base checkpoint is fixed (its own seed), like
a pretrained base model every run starts from; a request's seed only drives
sampling.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

BASE_SEED = 20250122  # DeepSeek-R1's release date: any fixed value would do


@dataclass(frozen=True)
class ToyPrompt:
    features: tuple[float, float, float]
    correct: int  # index of the choice the accuracy reward pays for


TOY_PROMPTS: tuple[ToyPrompt, ...] = (
    ToyPrompt((1.0, -0.5, 0.25), correct=2),
    ToyPrompt((-0.8, 0.6, 0.1), correct=0),
    ToyPrompt((0.3, 0.9, -0.7), correct=1),
    ToyPrompt((-0.2, -0.9, 0.8), correct=3),
    ToyPrompt((0.7, 0.4, 0.9), correct=2),
    ToyPrompt((-0.6, -0.3, -0.9), correct=1),
)


def base_state(n_features: int = 3, n_choices: int = 4, dtype=torch.float64) -> dict[str, torch.Tensor]:
    """Weights of the base checkpoint, drawn from a private generator (never the global RNG)."""
    gen = torch.Generator().manual_seed(BASE_SEED)
    return {
        "logits.weight": torch.randn(n_choices, n_features, generator=gen, dtype=dtype) * 0.5,
        "logits.bias": torch.randn(n_choices, generator=gen, dtype=dtype) * 0.1,
    }
