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


ROLES = ("correct", "mixed", "unformatted", "wrong")


@dataclass(frozen=True)
class ToyPrompt:
    """A prompt and what its four choices stand for (the toy's analogue of completions).

    correct:     right final answer, readable reasoning inside <think>...</think>
    mixed:       right final answer, reasoning that mixes languages (R1-Zero's known flaw)
    unformatted: ignores the template, so no answer can be parsed
    wrong:       wrong final answer, well formatted
    The GRPO walkthrough's own reward pays for `correct` only.
    """
    features: tuple[float, float, float]
    correct: int

    @property
    def mixed(self) -> int:
        return (self.correct + 1) % 4

    @property
    def unformatted(self) -> int:
        return (self.correct + 2) % 4

    @property
    def wrong(self) -> int:
        return (self.correct + 3) % 4

    def role(self, choice: int) -> str:
        return ROLES[(choice - self.correct) % 4]


TOY_PROMPTS: tuple[ToyPrompt, ...] = (
    ToyPrompt((1.0, -0.5, 0.25), correct=2),
    ToyPrompt((-0.8, 0.6, 0.1), correct=0),
    ToyPrompt((0.3, 0.9, -0.7), correct=1),
    ToyPrompt((-0.2, -0.9, 0.8), correct=3),
    ToyPrompt((0.7, 0.4, 0.9), correct=2),
    ToyPrompt((-0.6, -0.3, -0.9), correct=1),
)


def student_base_state(bottleneck: int = 1, n_features: int = 3, n_choices: int = 4,
                       dtype=torch.float64) -> dict[str, torch.Tensor]:
    """The distillation student's own starting weights (a smaller, separately initialised model)."""
    gen = torch.Generator().manual_seed(BASE_SEED + 1)
    return {
        "logits.0.weight": torch.randn(bottleneck, n_features, generator=gen, dtype=dtype) * 0.5,
        "logits.1.weight": torch.randn(n_choices, bottleneck, generator=gen, dtype=dtype) * 0.5,
        "logits.1.bias": torch.randn(n_choices, generator=gen, dtype=dtype) * 0.1,
    }


def base_state(n_features: int = 3, n_choices: int = 4, dtype=torch.float64) -> dict[str, torch.Tensor]:
    """Weights of the base checkpoint, drawn from a private generator (never the global RNG)."""
    gen = torch.Generator().manual_seed(BASE_SEED)
    return {
        "logits.weight": torch.randn(n_choices, n_features, generator=gen, dtype=dtype) * 0.5,
        "logits.bias": torch.randn(n_choices, generator=gen, dtype=dtype) * 0.1,
    }
