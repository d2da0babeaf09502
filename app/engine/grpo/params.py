"""The loss conventions every kind's GRPO step takes (where the paper, TRL, verl, Dr. GRPO and
DAPO differ), validated: what a request may choose, each refusal naming the field and its range.
A kind's own parameters extend Conventions.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.engine.grpo.presets import DEFAULT_PRESET, PRESET_NAMES, PRESETS

MAX_LENGTH = 1 << 17  # 131,072: a recorded run's max_completion_length (8,192 and more are common)


# Optional numbers a preset may set (verl's dual clip, clamps): "none" in a URL turns them off.
OPTIONAL_NUMBERS = ("dual_clip", "log_ratio_clamp", "kl_clamp", "is_clip_min", "is_clip_max")
OFF = "none"


class Conventions(BaseModel):
    """How the loss is computed from the group's log-probabilities and rewards: the choices
    where the GRPO paper, TRL, verl, Dr. GRPO and DAPO differ (docs/design.md §3).

    `preset` fills every convention it names; a field given explicitly overrides it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preset: Annotated[Literal["deepseekmath", "trl", "verl", "dr_grpo", "dapo", "gspo", "cispo"], Field(
        description="Named set of conventions: deepseekmath (the paper), trl (TRL 1.16 defaults), "
                    "verl (verl 0.9.1 GRPO), dr_grpo, dapo, gspo (TRL's GSPO setup), cispo (TRL's CISPO). "
                    "Explicit parameters override it.")] = DEFAULT_PRESET
    advantage_std: Annotated[Literal["population", "sample", "none"], Field(
        description="Divide A by the group's population std, its sample (Bessel) std as TRL and verl "
                    "do, or not at all (Dr. GRPO: centre only).")] = "population"
    advantage_epsilon: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False,
        description="Added to the group's std (TRL 1e-4, verl 1e-6; 0: none, as UNIPO's explainer writes "
                    "it, a group of equal rewards then gets A = 0); unused with advantage_std=none.")] = 1e-4
    clip_epsilon: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False,
        description="e_low: ratios are clipped to [1-e_low, 1+e_high].")] = 0.2
    clip_epsilon_high: Annotated[float, Field(gt=0, le=10, allow_inf_nan=False,
        description="e_high, the band's upper end (DAPO's clip-higher: 0.28). "
                    "Default: equal to clip_epsilon.")] = 0.2
    dual_clip: Annotated[float | None, Field(gt=1, le=1000, allow_inf_nan=False,
        description="c > 1: for A < 0 the objective term is floored at c·A, so the loss is capped at "
                    "c·|A| (verl's clip_ratio_c, default 3). Absent or \"none\": off.")] = None
    beta: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False,
        description="Weight of the KL penalty (0.04 in DeepSeekMath, 0.001 in DeepSeek-R1 and verl, "
                    "0 in TRL, Dr. GRPO and DAPO).")] = 0.04
    kl_estimator: Annotated[Literal["k1", "k2", "k3"], Field(
        description="Schulman's KL estimator, with D = log pi_ref - log pi: k1 = -D, k2 = D^2/2, "
                    "k3 = exp(D) - D - 1.")] = "k3"
    kl_placement: Annotated[Literal["loss", "reward"], Field(
        description="loss: beta·KL is added to the loss (GRPO). reward: beta·KL of pi_old is subtracted "
                    "from each reward before the advantages (PPO-style RLHF).")] = "loss"
    kl_bias_correction: Annotated[bool, Field(
        description="Multiply the KL term by the ratio rho (TRL's use_bias_correction_kl, on by default).",
    )] = False
    log_ratio_clamp: Annotated[float | None, Field(gt=0, le=1000, allow_inf_nan=False,
        description="Clamp log-ratios to ±this before exp(): the policy ratio's, and k3's ref/policy "
                    "(verl: 20; k1 and k2 are never clamped). "
                    "Absent or \"none\": off.")] = None
    kl_clamp: Annotated[float | None, Field(gt=0, le=1e6, allow_inf_nan=False,
        description="Clamp the k3 estimate to ±this (verl's low_var_kl: 10; k1 and k2 are never "
                    "clamped). Absent or \"none\": off.")] = None
    loss_aggregation: Annotated[Literal["sample_mean", "token_mean", "token_sum_norm"], Field(
        description="sample_mean: mean over each completion's tokens, then over the group (GRPO paper); "
                    "token_mean: over all tokens of the group (DAPO, TRL dapo/bnpo, verl token-mean); "
                    "token_sum_norm: token sums / (G·max_length) (Dr. GRPO).")] = "sample_mean"
    max_length: Annotated[int, Field(ge=1, le=MAX_LENGTH,
        description="The constant of token_sum_norm (TRL's max_completion_length); 1 for "
                    "one-token completions.")] = 1
    policy_loss: Annotated[Literal["clip", "cispo"], Field(
        description="clip: min(ρA, clip(ρ)A), the PPO/GRPO surrogate. cispo (MiniMax-M1; TRL loss_type=cispo): "
                    "sg(min(ρ, ε_high))·A·log π, the capped ratio a constant weight, so no token loses its "
                    "gradient; clip_epsilon_high is then an absolute bound on ρ (TRL recommends 5).")] = "clip"
    importance_sampling_level: Annotated[Literal["token", "sequence"], Field(
        description="token: one ratio per token. sequence (GSPO): ρ_i = exp(mean over the completion's "
                    "tokens of log π − log π_old), one ratio per completion, clipped and shared by its tokens "
                    "(TRL importance_sampling_level, verl loss_mode=gspo).")] = "token"
    is_correction: Annotated[Literal["none", "token_truncate", "token_mask", "sequence_truncate",
                                     "sequence_mask"], Field(
        description="TRL's vLLM importance-sampling correction: each token's policy term × "
                    "exp(log π_old − log π_sampling) (per token, or summed over the completion), truncated to "
                    "[is_clip_min, is_clip_max] or set to 0 outside it (mask). Needs the rollout engine's "
                    "log-probs; without them the weight is 1.")] = "none"
    is_clip_min: Annotated[float | None, Field(ge=0, le=1e6, allow_inf_nan=False,
        description="The IS correction's lower bound C_min (TRL vllm_importance_sampling_clip_min; "
                    "default none).")] = None
    is_clip_max: Annotated[float | None, Field(gt=0, le=1e6, allow_inf_nan=False,
        description="The IS correction's upper bound C_max (TRL vllm_importance_sampling_clip_max, "
                    "default 3). \"none\": no upper bound.")] = 3.0

    @model_validator(mode="before")
    @classmethod
    def _fill_from_preset(cls, data):
        """Preset values for every convention not given; `clip_epsilon_high` follows clip_epsilon."""
        if not isinstance(data, dict):
            return data
        # A blank form field means "not given"; an explicit None (a dump) or "none" means off.
        data = {k: v for k, v in data.items() if not (v == "" or (v is None and k not in OPTIONAL_NUMBERS))}
        for name in OPTIONAL_NUMBERS:
            if isinstance(data.get(name), str) and data[name].strip().lower() == OFF:
                data[name] = None
        preset = data.get("preset", DEFAULT_PRESET)
        values = PRESETS.get(preset) if isinstance(preset, str) else None
        if values is None:
            return data  # the Literal names the valid presets in the 422
        for name, value in values.items():
            data.setdefault(name, value)
        # The top of the band follows a valid clip_epsilon; a refused one is named once, not twice.
        data.setdefault("clip_epsilon_high", values.get("clip_epsilon_high", _follow(data["clip_epsilon"],
                                                                                     values["clip_epsilon"])))
        return data

    @field_validator("kl_bias_correction")
    @classmethod
    def _correction_needs_kl_in_loss(cls, value, info):
        # kl_placement is declared first, so it is validated by now: the 422 names this field.
        if value and info.data.get("kl_placement") == "reward":
            raise ValueError("needs kl_placement=loss: a KL in the reward is computed from pi_old "
                             "and takes no ratio")
        return value

    @field_validator("is_clip_max")
    @classmethod
    def _is_bounds(cls, value, info):
        # as TRL's GRPOConfig.__post_init__ refuses them (grpo_config.py ~lines 1152-1170)
        low = info.data.get("is_clip_min")
        if value is not None and low is not None and low >= value:
            raise ValueError(f"must be greater than is_clip_min ({low:g})")
        if value is None and low is None and str(info.data.get("is_correction", "")).endswith("truncate"):
            raise ValueError("a *_truncate is_correction needs is_clip_min or is_clip_max")
        return value

    def conventions(self) -> Conventions:
        return Conventions(**{n: getattr(self, n) for n in Conventions.model_fields})

    def url_overrides(self) -> dict:
        """The fields a URL must carry to rebuild this object: what differs from the defaults,
        for conventions from what the preset gives (clip_epsilon_high: from what it follows)."""
        preset = PRESETS[self.preset]
        implied = Conventions(preset=self.preset, clip_epsilon=self.clip_epsilon).model_dump()
        out = {}
        fields = type(self).model_fields
        for name in sorted(fields, key=_url_rank):
            field, value = fields[name], getattr(self, name)
            if name == "clip_epsilon":
                expected = preset[name]
            elif name in implied and name != "preset":
                expected = implied[name]
            else:
                expected = field.default
            if value != expected:
                out[name] = value
        return out


def _follow(clip_epsilon: object, preset_value: object) -> object:
    """clip_epsilon as the band's top when it is a valid ε, else the preset's (its own 422 says why)."""
    try:
        value = float(clip_epsilon)  # type: ignore[arg-type]  # anything typed; a refusal is caught below
    except (TypeError, ValueError):
        return preset_value
    return clip_epsilon if math.isfinite(value) and 0 < value < 1 else preset_value


CONVENTION_FIELDS = tuple(Conventions.model_fields)
assert get_args(Conventions.model_fields["preset"].annotation) == PRESET_NAMES, "one list of presets"
# URLs list the fields older than the conventions first, in their old order, so links made
# before them still come back byte for byte.
_URL_ORDER = ("seed", "group_size", "clip_epsilon", "beta", "advantage_epsilon", "learning_rate",
              "iteration", "inner_steps", "inner_step", "prompt", "rewards")


def _url_rank(name: str) -> tuple[int, int]:
    return (0, _URL_ORDER.index(name)) if name in _URL_ORDER else (1, 0)


