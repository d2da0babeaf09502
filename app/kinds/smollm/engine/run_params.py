"""Validated parameters of the real model's R1-Zero run (issue 33): GRPO straight from the checkpoint,
many steps over the built-in prompts, as DeepSeek-R1-Zero trains the base model with rule rewards only
(arXiv 2501.12948 §2.2). The loss conventions are the shared `Conventions`, so every preset applies.

Bounds keep a run on two CPU cores to minutes: a step samples G answers of up to T tokens from the
current policy, scores them once with the checkpoint (the reference) and takes one forward, backward and
AdamW step (TRL's num_iterations = 1: π_old is the policy that sampled, so ρ = 1 at the step).
"""
from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from app.engine.grpo.params import Conventions

DEFAULT_STEPS, MAX_STEPS = 20, 200
MAX_RUN_GROUP = 16
MIN_RUN_TOKENS, MAX_RUN_TOKENS, DEFAULT_RUN_TOKENS = 4, 64, 32


class SmolRunParams(Conventions):
    steps: Annotated[int, Field(ge=1, le=MAX_STEPS,
        description="GRPO steps; step s answers the built-in prompt s mod 6 (app/kinds/smollm/domain/tasks.py).")] \
        = DEFAULT_STEPS
    group_size: Annotated[int, Field(ge=2, le=MAX_RUN_GROUP, description="G: answers sampled per step.")] = 8
    max_new_tokens: Annotated[int, Field(ge=MIN_RUN_TOKENS, le=MAX_RUN_TOKENS,
        description="T: an answer stops at <|im_end|> or after this many tokens.")] = DEFAULT_RUN_TOKENS
    temperature: Annotated[float, Field(ge=0.1, le=1.5, allow_inf_nan=False,
        description="Sampling temperature of the current policy; the log-probs are read from logits / temperature "
                    "(TRL's convention, as the single step's).")] = 0.8
    seed: Annotated[int, Field(ge=0, le=2**31 - 1, description="Step s samples with seed + s.")] = 0
    learning_rate: Annotated[float, Field(gt=0, le=1e-3, allow_inf_nan=False,
        description="AdamW step size (weight decay 0, no gradient clipping): this run's own choice, not the TRL "
                    "defaults the single step takes (lr 1e-6, gradient norm clipped to 1).")] = 1e-5
    max_length: Annotated[int, Field(ge=1, le=4096,
        description="The constant of token_sum_norm (Dr. GRPO): the answers' token budget.")] = DEFAULT_RUN_TOKENS

    @model_validator(mode="before")
    @classmethod
    def _max_length_follows_new_tokens(cls, data):
        if isinstance(data, dict) and data.get("max_length") in (None, "") and "max_new_tokens" in data:
            data = {**data, "max_length": data["max_new_tokens"]}
        return data

    def conventions(self) -> Conventions:
        return Conventions(**{n: getattr(self, n) for n in Conventions.model_fields})
