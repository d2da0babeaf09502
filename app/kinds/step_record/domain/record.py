"""The GRPO step record (docs/reference/step-record.md): one optimizer step of a real run, as its framework
computed it. This file is the one definition: the parser, the refusals by field path and the
JSON Schema served at /api/schemas/step-record all come from these models.

Nothing in a record is executed; `framework_config` is kept as data and only shown.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.kinds.step_record.domain.arrays import FloatArray, IntArray, describe

FORMAT = "grpo.step-record"
VERSION = 1
MAX_GROUPS = 1024
MAX_COMPLETIONS = 4096  # over all groups
MAX_TOKENS = 1 << 21  # over all completions: 2M tokens, 32x a G 16 x 4,096 step


class _Model(BaseModel):
    # strict: a field takes only its JSON type, as the JSON Schema says: "0.5" (a string) or true is not a
    # number, "3" or 3.5 is not an integer, 1 or "yes" is not a bool; an integer still reads as a number
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True, strict=True)


Name = Annotated[str, Field(min_length=1, max_length=200)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Bounded = Annotated[float, Field(allow_inf_nan=False, ge=-1e12, le=1e12)]  # rewards, advantages


class Run(_Model):
    framework: Name = Field(description="who wrote the record: trl, verl, unipo, or any name")
    framework_version: Annotated[str, Field(max_length=100)] = ""
    model: Name = Field(description="the recorded model's name; the graph's model node is named after it")
    step: Annotated[int, Field(ge=0, le=10**9)] = 0
    note: Annotated[str, Field(max_length=2000)] = ""
    dtype: Literal["float32", "bfloat16", "float16", "float64"] = "float32"


class Config(_Model):
    """The conventions the run used, in the app's names (docs/reference/step-record.md maps TRL's and verl's)."""
    policy_loss: Literal["clip", "cispo"] = "clip"
    loss_aggregation: Literal["sample_mean", "token_mean", "token_sum_norm"] = "token_mean"
    token_normalizer: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None
    clip_epsilon: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 0.2
    clip_epsilon_high: Annotated[float, Field(gt=0, le=10, allow_inf_nan=False)] = 0.2
    dual_clip: Annotated[float | None, Field(gt=1, le=1000, allow_inf_nan=False)] = None
    # verl's overflow guards: the log-ratio clamped to ±this before exp(), k3 clamped to ±kl_clamp
    log_ratio_clamp: Annotated[float | None, Field(gt=0, le=1000, allow_inf_nan=False)] = None
    kl_clamp: Annotated[float | None, Field(gt=0, le=1e6, allow_inf_nan=False)] = None
    beta: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] = 0.0
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    kl_bias_correction: bool = False
    advantage_std: Literal["sample", "population", "none"] = "sample"
    advantage_epsilon: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 1e-4  # 0: none (UNIPO)
    importance_sampling_level: Literal["token", "sequence"] = "token"
    is_correction: Literal["none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] = "none"
    is_clip_min: Annotated[float | None, Field(ge=0, allow_inf_nan=False)] = None
    is_clip_max: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None
    max_length: Annotated[int, Field(ge=1, le=1 << 17)] = 1
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=1 << 16)] = 1


class Completion(_Model):
    token_ids: IntArray
    tokens: Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=1 << 20)]
    mask: IntArray | None = None
    rewards: dict[str, Bounded | None]
    reward: Bounded | None = None
    advantage: Bounded
    logprobs: FloatArray
    old_logprobs: FloatArray | None = None
    ref_logprobs: FloatArray | None = None
    sampling_logprobs: FloatArray | None = None
    entropy: FloatArray | None = None
    truncated: bool = False
    # With gradient accumulation, the micro-batch (0, 1, …) the completion was in: the framework logs
    # the mean of each micro-batch's own metrics, and the app recomputes them the same way
    micro_batch: Annotated[int | None, Field(ge=0, le=1 << 16)] = None

    @model_validator(mode="after")
    def _same_lengths(self) -> Completion:
        n = len(self.token_ids)
        if n == 0:
            raise ValueError("token_ids: a completion holds at least one token")
        for name in ("tokens", "mask", "logprobs", "old_logprobs", "ref_logprobs", "sampling_logprobs", "entropy"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{name}: {len(value)} values, but token_ids has {n}")
        if self.mask is not None and not np.isin(self.mask, (0, 1)).all():
            raise ValueError("mask: values must be 0 or 1")
        for name in ("logprobs", "old_logprobs", "ref_logprobs", "sampling_logprobs"):
            value = getattr(self, name)
            if value is not None and ((value > 1e-6).any() or (value < -1e4).any()):
                raise ValueError(f"{name}: a log-probability is between −10,000 and 0 (a real token's is above "
                                 "−200 in float32)")
        if self.entropy is not None and ((self.entropy < -1e-6).any() or (self.entropy > 1e4).any()):
            raise ValueError("entropy: an entropy is between 0 and 10,000 nats")
        for i, token in enumerate(self.tokens):
            try:
                token.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"tokens[{i}]: not valid UTF-8 text (a lone surrogate)") from None
        return self

    @property
    def length(self) -> int:
        return len(self.token_ids)

    def mask_or_ones(self) -> np.ndarray:
        return np.ones(self.length, dtype=np.int64) if self.mask is None else self.mask


class Group(_Model):
    id: Annotated[str, Field(max_length=200)] = ""
    prompt: Annotated[str, Field(max_length=200_000)]
    prompt_token_ids: IntArray | None = None
    completions: Annotated[list[Completion], Field(min_length=1, max_length=MAX_COMPLETIONS)]


class StepRecord(_Model):
    format: Literal["grpo.step-record"] = Field(description="names the format")
    version: Literal[1]
    run: Run
    config: Config = Config()
    framework_config: dict[str, Any] = {}
    reward_functions: Annotated[list[Name], Field(min_length=1, max_length=64)]
    reward_weights: list[Finite] | None = None
    groups: Annotated[list[Group], Field(min_length=1, max_length=MAX_GROUPS)]
    metrics: dict[Annotated[str, Field(max_length=200)], Finite | None] = {}

    @field_validator("version", mode="before")
    @classmethod
    def _integer_version(cls, value: Any) -> Any:
        # a Literal compares by ==, so true and 1.0 would pass for 1 even in strict mode
        if type(value) is not int:
            raise ValueError(f"must be the integer {VERSION}, not {describe(value)}")
        return value

    @field_validator("reward_functions")
    @classmethod
    def _unique(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError("two reward functions share a name")
        return names

    @model_validator(mode="after")
    def _consistent(self) -> StepRecord:
        if self.reward_weights is not None and len(self.reward_weights) != len(self.reward_functions):
            raise ValueError(f"reward_weights: {len(self.reward_weights)} weights for "
                             f"{len(self.reward_functions)} reward functions")
        total = sum(len(g.completions) for g in self.groups)
        if total > MAX_COMPLETIONS:
            raise ValueError(f"groups: {total} completions exceed the limit of {MAX_COMPLETIONS}")
        tokens = sum(c.length for g in self.groups for c in g.completions)
        if tokens > MAX_TOKENS:
            raise ValueError(f"groups: {tokens} tokens exceed the limit of {MAX_TOKENS}")
        marked = [c.micro_batch is not None for _, _, c in self.completions()]
        if any(marked) and not all(marked):
            raise ValueError("groups: micro_batch is given for some completions and not others")
        names = set(self.reward_functions)
        for gi, group in enumerate(self.groups):
            for ci, c in enumerate(group.completions):
                where = f"groups[{gi}].completions[{ci}]"
                if set(c.rewards) != names:
                    raise ValueError(f"{where}.rewards: has {sorted(c.rewards)}, but reward_functions "
                                     f"names {self.reward_functions}")
                if self.config.beta > 0 and c.ref_logprobs is None:
                    raise ValueError(f"{where}.ref_logprobs: needed, since config.beta is {self.config.beta:g}")
                if self.config.is_correction != "none" and c.sampling_logprobs is None:
                    raise ValueError(f"{where}.sampling_logprobs: needed, since config.is_correction is "
                                     f"{self.config.is_correction}")
        return self

    @property
    def weights(self) -> list[float]:
        return list(self.reward_weights) if self.reward_weights is not None else [1.0] * len(self.reward_functions)

    def completions(self) -> list[tuple[int, int, Completion]]:
        return [(gi, ci, c) for gi, g in enumerate(self.groups) for ci, c in enumerate(g.completions)]

    def micro_batches(self) -> list[list[int]]:
        """Rows (record order) of each micro-batch; one batch of every row when none is named."""
        rows = self.completions()
        if not rows or rows[0][2].micro_batch is None:
            return [list(range(len(rows)))]
        found: dict[int, list[int]] = {}
        for k, (_, _, c) in enumerate(rows):
            found.setdefault(c.micro_batch or 0, []).append(k)
        return [found[m] for m in sorted(found)]

    @property
    def token_count(self) -> int:
        return sum(c.length for _, _, c in self.completions())


def record_json_schema() -> dict[str, Any]:
    schema = StepRecord.model_json_schema(mode="validation")
    # JSON Schema draft 2020-12 (named here, not as a `$schema` URL: the app names no outside host)
    schema["$id"] = "/api/schemas/step-record"
    schema["title"] = "GRPO step record (grpo.step-record, version 1)"
    schema["description"] = ("One optimizer step of a GRPO run as its framework computed it; "
                             "documented in docs/reference/step-record.md.")
    return schema
