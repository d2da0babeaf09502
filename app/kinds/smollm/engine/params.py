"""Validated parameters of the real model's live GRPO step (issue 33), as TokenParams are the tiny LM's.

The loss conventions are the shared `Conventions` (presets included), so every preset and convention
applies unchanged; what is new is the prompt (an index into domain/tasks.py's TASKS), the sampling
(G, new tokens, temperature, seed), the policy's distance from the sampler (μ inner AdamW steps) and
which block's attention weights are kept. Bounds keep one step on two CPU cores to minutes: G ≤ 16,
T ≤ 96, μ ≤ 4. A prompt whose chat-formatted tokens and `max_new_tokens` exceed the model's context
is refused (validation context `prompt_tokens` and `context_length`, which the step supplies), naming
max_new_tokens.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator, model_validator

from app.engine.grpo.params import Conventions
from app.kinds.smollm.domain.tasks import TASKS

MAX_GROUP = 16
MIN_NEW_TOKENS, MAX_NEW_TOKENS, DEFAULT_NEW_TOKENS = 4, 96, 48
MAX_INNER_STEPS = 4
N_BLOCKS = 30  # SmolLM2-135M's; a smaller test model refuses a block it lacks at step time
DEFAULT_ATTENTION_BLOCK = 12


class SmolParams(Conventions):
    prompt: Annotated[int, Field(ge=0, le=len(TASKS) - 1,
        description="Which built-in prompt (app/kinds/smollm/domain/tasks.py) the group answers.")] = 0
    group_size: Annotated[int, Field(ge=2, le=MAX_GROUP, description="G: completions sampled for the prompt.")] = 8
    max_new_tokens: Annotated[int, Field(ge=MIN_NEW_TOKENS, le=MAX_NEW_TOKENS,
        description="T: a completion stops at <|im_end|> or after this many tokens.")] = DEFAULT_NEW_TOKENS
    temperature: Annotated[float, Field(ge=0.1, le=1.5, allow_inf_nan=False,
        description="Sampling temperature of the old policy (the checkpoint).")] = 0.8
    seed: Annotated[int, Field(ge=0, le=2**31 - 1, description="Seeds the sampling of the group.")] = 0
    inner_steps: Annotated[int, Field(ge=1, le=MAX_INNER_STEPS,
        description="μ: AdamW steps the policy has taken on this group before the recorded one (π_old stays "
                    "the checkpoint), so the ratios are not all 1.")] = 2
    learning_rate: Annotated[float, Field(gt=0, le=1e-3, allow_inf_nan=False,
        description="AdamW step size of the policy updates (weight decay 0).")] = 1e-5
    attention_block: Annotated[int, Field(ge=0, le=N_BLOCKS - 1,
        description="The block whose per-head attention weights are kept.")] = DEFAULT_ATTENTION_BLOCK
    max_length: Annotated[int, Field(ge=1, le=4096,
        description="The constant of token_sum_norm (Dr. GRPO); max_new_tokens when not given.")] = DEFAULT_NEW_TOKENS

    @model_validator(mode="before")
    @classmethod
    def _max_length_follows_new_tokens(cls, data):
        if isinstance(data, dict) and data.get("max_length") in (None, "") and "max_new_tokens" in data:
            data = {**data, "max_length": data["max_new_tokens"]}
        return data

    @field_validator("max_new_tokens")
    @classmethod
    def _fits_the_context(cls, value: int, info: ValidationInfo) -> int:
        context = info.context or {}
        tokens, limit = context.get("prompt_tokens"), context.get("context_length")
        prompt = info.data.get("prompt")
        if tokens is None or limit is None or prompt is None:
            return value
        used = tokens[prompt] if isinstance(tokens, (list, tuple, dict)) else int(tokens)
        if used + value > limit:
            raise ValueError(f"prompt {prompt}'s {used} chat-formatted tokens + {value} new tokens exceed the "
                             f"model's context of {limit} tokens")
        return value

    @field_validator("attention_block")
    @classmethod
    def _block_exists(cls, value: int, info: ValidationInfo) -> int:
        n_layer = (info.context or {}).get("n_layer")
        if n_layer is not None and value >= n_layer:
            raise ValueError(f"the model has {n_layer} blocks (0 to {n_layer - 1})")
        return value

    def conventions(self) -> Conventions:
        return Conventions(**{n: getattr(self, n) for n in Conventions.model_fields})
