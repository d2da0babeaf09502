"""Validated parameters of the tiny-LM walkthrough's token-level GRPO step.

The loss conventions are `Conventions` (presets included), so the toy and the tiny LM take
the same `preset`, `beta`, `loss_aggregation` … fields; what is new is the group (seed and
G), how far the policy has moved from the sampling policy (`inner_steps`), and which of
R1's reward parts count. Bounds keep each request's work small (G ≤ 16, T ≤ 24).
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.engine.grpo.params import Conventions

MAX_NEW_TOKENS = 24  # T: a completion stops at <end> or here
MAX_TOKEN_GROUP = 16
MAX_TOKEN_INNER_STEPS = 8
DEFAULT_TOKEN_SEED = 3  # a group with right and wrong, long and short, clipped and unclipped tokens (tested)
REWARD_CHOICES = {"accuracy+format": ("accuracy", "format"),  # R1-Zero's rule rewards
                  "accuracy+format+language": ("accuracy", "format", "language")}  # R1's reasoning RL


class TokenParams(Conventions):
    seed: Annotated[int, Field(ge=0, le=2**31 - 1,
        description="Picks the prompt and seeds the sampling of the group.")] = DEFAULT_TOKEN_SEED
    group_size: Annotated[int, Field(ge=2, le=MAX_TOKEN_GROUP,
        description="G: completions sampled for the prompt.")] = 8
    inner_steps: Annotated[int, Field(ge=0, le=MAX_TOKEN_INNER_STEPS,
        description="Optimiser steps the policy has already taken on this group (π_old stays the sampling "
                    "model): with 0 every ratio is exactly 1.")] = 2
    learning_rate: Annotated[float, Field(gt=0, le=0.01, allow_inf_nan=False,
        description="AdamW step size of the policy updates.")] = 2e-4
    reward_parts: Annotated[Literal["accuracy+format", "accuracy+format+language"], Field(
        description="Which rule rewards add up to r: R1-Zero's accuracy+format, or R1's with language "
                    "consistency.")] = "accuracy+format+language"
    max_length: Annotated[int, Field(ge=1, le=4096,
        description="The constant of token_sum_norm (Dr. GRPO); the completions' cap, 24 tokens, by default.",
    )] = MAX_NEW_TOKENS

    def conventions(self) -> Conventions:
        return Conventions(**{n: getattr(self, n) for n in Conventions.model_fields})

    def url_overrides(self) -> dict:
        """What differs from the defaults (conventions: from what the preset gives), in field order."""
        defaults = TokenParams(preset=self.preset, clip_epsilon=self.clip_epsilon)
        base = TokenParams()
        out = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            expected: object
            if name == "clip_epsilon":
                expected = TokenParams(preset=self.preset).clip_epsilon
            elif name == "preset":
                expected = base.preset
            else:
                expected = getattr(defaults, name)
            if value != expected:
                out[name] = value
        return out
