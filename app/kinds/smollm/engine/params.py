"""Validated parameters of the real model's live GRPO step (issue 33), as TokenParams are the tiny LM's.

The loss conventions are the shared `Conventions` (presets included), so every preset and convention
applies unchanged; what is new is the prompt (an index into domain/tasks.py's TASKS), the sampling
(G, new tokens, temperature, seed), the optimiser (TRL's GRPOConfig defaults: μ = 1, AdamW at lr 1e-6,
the gradient's norm clipped to 1) and which block's attention weights are kept. Bounds keep one step on
two CPU cores to minutes: G ≤ 16, T ≤ 96, μ ≤ 4. A prompt whose chat-formatted tokens and
`max_new_tokens` exceed the model's context is refused (validation context `prompt_tokens` and
`context_length`, which the step supplies), naming max_new_tokens.

`prompt_text` is a question the reader types instead (domain/own_prompt.py checks it and builds its rule
rewards; `expected`, optional, is what the accuracy reward checks); with it the built-in index is ignored.
It is bounded by characters, not tokens, so no tokenizer is needed to check it: a byte-level BPE spends at
most one token per UTF-8 byte (at most 4 a character), so MAX_PROMPT_CHARS characters, SmolLM2's chat
template around them (31 tokens, CHAT_TOKENS bounds it) and T ≤ 96 new tokens always fit its context; the
step still checks the exact count against the loaded model's context (a smaller GGUF's is shorter).
`max_length` follows a valid `max_new_tokens` when not given, so a refused max_new_tokens is named once.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator

from app.engine.grpo.params import Conventions
from app.kinds.smollm.domain.own_prompt import MAX_EXPECTED_CHARS, MAX_PROMPT_CHARS, check_expected, check_prompt
from app.kinds.smollm.domain.tasks import TASKS
from app.kinds.smollm.engine.model_config import SMOLLM2_135M

MAX_GROUP = 16
MIN_NEW_TOKENS, MAX_NEW_TOKENS, DEFAULT_NEW_TOKENS = 4, 96, 48
MAX_INNER_STEPS = 4
MAX_BLOCKS = 256  # a bound on the query; the step refuses a block its model lacks (SmolLM2-135M has 30)
ATTENTION_DEPTH = 0.4  # the default attention block's place in the model's depth: 12 of SmolLM2's 30


def default_attention_block(n_layer: int) -> int:
    """The block whose attention a step keeps unless told: 40 % of the way up (12 of 30, 1 of 2)."""
    return min(max(round(ATTENTION_DEPTH * n_layer), 0), n_layer - 1)


TEXT_FIELDS = ("prompt_text", "expected")  # the reader's own words: taken as typed ("none" is text, not "off")
CHAT_TOKENS = 64  # SmolLM2's chat template around one user message: 31 tokens (its system line, the turn markers)
assert 4 * MAX_PROMPT_CHARS + CHAT_TOKENS + MAX_NEW_TOKENS <= SMOLLM2_135M.context_length, "a typed prompt must fit"


class SmolParams(Conventions):
    prompt: Annotated[int, Field(ge=0, le=len(TASKS) - 1,
        description="Which built-in prompt (app/kinds/smollm/domain/tasks.py) the group answers; ignored when "
                    "prompt_text is given.")] = 0
    prompt_text: Annotated[str | None, Field(
        description=f"Your own question (1 to {MAX_PROMPT_CHARS:,} characters, no control characters), asked "
                    "instead of the built-in prompt, whose index is then ignored. Its rewards: accuracy (with "
                    "`expected`), format and length (app/kinds/smollm/domain/own_prompt.py).")] = None
    expected: Annotated[str | None, Field(
        description=f"The expected answer to prompt_text (one line, at most {MAX_EXPECTED_CHARS} characters): the "
                    "accuracy reward checks it (a number: the reply's last number equals it; else it appears "
                    "as a whole word or phrase). Without it only format and length pay.")] = None
    group_size: Annotated[int, Field(ge=2, le=MAX_GROUP, description="G: completions sampled for the prompt.")] = 8
    max_new_tokens: Annotated[int, Field(ge=MIN_NEW_TOKENS, le=MAX_NEW_TOKENS,
        description="T: a completion stops at <|im_end|> or after this many tokens.")] = DEFAULT_NEW_TOKENS
    temperature: Annotated[float, Field(ge=0.1, le=1.5, allow_inf_nan=False,
        description="Sampling temperature of the old policy (the checkpoint); every log-prob of the step is "
                    "read from logits / temperature, as TRL's and verl's are. 0.8, not TRL's 1.0: the built-in "
                    "prompts were chosen at 0.8 (domain/tasks.py).")] = 0.8
    seed: Annotated[int, Field(ge=0, le=2**31 - 1, description="Seeds the sampling of the group.")] = 0
    inner_steps: Annotated[int, Field(ge=1, le=MAX_INNER_STEPS,
        description="μ: updates of the policy on this group (TRL's num_iterations, default 1); the recorded step "
                    "is the μ-th, after μ − 1 AdamW steps (π_old stays the checkpoint). At μ = 1 the policy is "
                    "π_old, so every ratio is 1 and nothing clips.")] = 1
    learning_rate: Annotated[float, Field(gt=0, le=1e-3, allow_inf_nan=False,
        description="AdamW step size of the policy updates (TRL's GRPOConfig default, 1e-6).")] = 1e-6
    adam_beta1: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False,
        description="AdamW's β₁, the decay of its running mean of gradients (transformers' default).")] = 0.9
    adam_beta2: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False,
        description="AdamW's β₂, the decay of its running mean of squared gradients (transformers' default).")] \
        = 0.999
    adam_epsilon: Annotated[float, Field(gt=0, le=1e-3, allow_inf_nan=False,
        description="AdamW's ε, added to √v before dividing (transformers' default).")] = 1e-8
    weight_decay: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False,
        description="AdamW's decoupled weight decay, on every weight but the RMSNorm gains, as transformers' "
                    "Trainer groups them (its default 0).")] = 0.0
    max_grad_norm: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False,
        description="Before each AdamW step the policy's gradient is scaled down to this L2 norm when larger "
                    "(torch.nn.utils.clip_grad_norm_, as transformers' Trainer does; its default 1.0); 0: no "
                    "clipping.")] = 1.0
    attention_block: Annotated[int | None, Field(ge=0, le=MAX_BLOCKS - 1,
        description="The block whose per-head attention weights are kept (0 to the model's blocks - 1); "
                    "default: the block 40 % of the way up, 12 of SmolLM2-135M's 30.")] = None
    max_length: Annotated[int, Field(ge=1, le=4096,
        description="The constant of token_sum_norm (Dr. GRPO); max_new_tokens when not given.")] = DEFAULT_NEW_TOKENS

    @model_validator(mode="before")
    @classmethod
    def _max_length_follows_new_tokens(cls, data):
        if isinstance(data, dict) and data.get("max_length") in (None, "") and "max_new_tokens" in data:
            try:  # only a valid max_new_tokens: a refused one is named once, not again as max_length
                new_tokens = _NEW_TOKENS.validate_python(data["max_new_tokens"])
            except ValidationError:
                return data
            data = {**data, "max_length": new_tokens}
        return data

    @model_validator(mode="before")
    @classmethod
    def _typed_question_replaces_the_index(cls, data):
        # ignored, so dropped: a typed question is one step (one job) whatever the built-in picker says
        if isinstance(data, dict) and data.get("prompt_text") not in (None, "") and "prompt" in data:
            data = {k: v for k, v in data.items() if k != "prompt"}
        return data

    @field_validator("prompt_text")
    @classmethod
    def _a_question(cls, value: str | None) -> str | None:
        return None if value is None else check_prompt(value)

    @field_validator("expected")
    @classmethod
    def _an_answer(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if "prompt_text" in info.data and info.data["prompt_text"] is None:  # (absent: refused, named already)
            raise ValueError("an expected answer goes with your own question (prompt_text): the built-in "
                             "prompts have their own")
        return check_expected(value)

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
            which = "your question" if info.data.get("prompt_text") else f"prompt {prompt}"
            raise ValueError(f"{which}'s {used} chat-formatted tokens + {value} new tokens exceed the "
                             f"model's context of {limit} tokens")
        return value

    @field_validator("attention_block")
    @classmethod
    def _block_exists(cls, value: int | None, info: ValidationInfo) -> int | None:
        n_layer = (info.context or {}).get("n_layer")
        if n_layer is not None and value is not None and value >= n_layer:
            raise ValueError(f"the model has {n_layer} blocks (0 to {n_layer - 1})")
        return value

    def conventions(self) -> Conventions:
        return Conventions(**{n: getattr(self, n) for n in Conventions.model_fields})


# max_new_tokens's own check (its type and bounds), for _max_length_follows_new_tokens
_NEW_TOKENS = TypeAdapter(Annotated[int, Field(ge=MIN_NEW_TOKENS, le=MAX_NEW_TOKENS)])
