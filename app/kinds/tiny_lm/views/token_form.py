"""The tiny-LM step's parameter form: TokenParams' fields, what each changes, refusals by field."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from app.engine.grpo.presets import PRESET_TITLES
from app.kinds.tiny_lm.engine.params import MAX_TOKEN_GROUP, MAX_TOKEN_INNER_STEPS, TokenParams
from app.views.param_fields import FieldSpec
from app.views.urls import query_value

TOKEN_FIELDS = tuple(TokenParams.model_fields)  # every field is a URL parameter


def _choices(name: str) -> tuple[str, ...]:
    return tuple(get_args(TokenParams.model_fields[name].annotation))


TOKEN_SPECS = (
    FieldSpec("seed", "seed", explain="Picks the prompt and seeds the sampling."),
    FieldSpec("group_size", "group size G", explain=f"Completions sampled (2–{MAX_TOKEN_GROUP})."),
    FieldSpec("inner_steps", "steps taken μ",
              explain=f"Optimiser steps the policy already took on this group (0–{MAX_TOKEN_INNER_STEPS}); "
                      "0: every ratio is 1."),
    FieldSpec("learning_rate", "learning rate", explain="AdamW step size (≤ 0.01)."),
    FieldSpec("reward_parts", "rewards", choices=_choices("reward_parts"),
              labels=("accuracy + format (R1-Zero)", "accuracy + format + language (R1)"),
              explain="Which rule rewards add up to r."),
    FieldSpec("preset", "preset", choices=_choices("preset"),
              labels=tuple(PRESET_TITLES[p] for p in _choices("preset")),
              explain="The paper's conventions, or TRL's, verl's, Dr. GRPO's, DAPO's, GSPO's (one ratio per "
                      "completion) or CISPO's (the ratio capped as a constant weight)."),
    FieldSpec("loss_aggregation", "aggregation", choices=("", *_choices("loss_aggregation")),
              explain="How per-token terms become one loss."),
    FieldSpec("clip_epsilon", "clip ε", explain="Ratios are clipped to [1−ε, 1+ε]."),
    FieldSpec("beta", "β (KL penalty)", explain="Weight of the KL penalty; 0 turns it off."),
    FieldSpec("policy_loss", "policy loss", choices=("", *_choices("policy_loss")),
              explain="clip: min(ρA, clip(ρ)A); cispo: sg(min(ρ, ε_high))·A·log π, no token loses its push."),
    FieldSpec("importance_sampling_level", "ratio level", choices=("", *_choices("importance_sampling_level")),
              explain="token: a ratio per token; sequence (GSPO): exp(mean log-ratio), one per completion."),
    FieldSpec("is_correction", "IS correction", choices=("", *_choices("is_correction")),
              explain="TRL's vLLM correction (× π_old/π_sampling): this model samples itself, so its weight is 1."),
)


def token_query(params: TokenParams) -> dict[str, str]:
    """The non-default parameters as URL query values."""
    return {name: query_value(name, value) for name, value in params.url_overrides().items()}


# What a training path takes from the form (views/screen.py's path_panel): the seed only;
# each stage's recipe sets its own G, steps, learning rate, rewards and conventions (engine/lm_plans.py).
PATH_FIELDS = ("seed",)

# Conventions the preset fills: blank in the form unless overridden, so changing the preset
# (without JavaScript too) is not undone by the previous preset's values.
PRESET_FILLED = ("loss_aggregation", "clip_epsilon", "beta", "policy_loss", "importance_sampling_level",
                 "is_correction")


@dataclass(frozen=True)
class TokenForm:
    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    specs: tuple[FieldSpec, ...] = TOKEN_SPECS
    in_force: dict[str, str] = field(default_factory=dict)  # a blank field's value, from the preset
    not_for_path: dict[str, str] = field(default_factory=dict)  # field -> why the shown path ignores it

    def for_path(self, title: str | None) -> TokenForm:
        """The form beside a training path: every field the path does not read says so."""
        if not title:
            return self
        name = title.split(":")[0]
        reason = (f"Not used by the {name} path below: its recipe sets this. It still changes the step above.")
        return replace(self, not_for_path={s.name: reason for s in self.specs if s.name not in PATH_FIELDS})

    @classmethod
    def from_params(cls, params: TokenParams) -> TokenForm:
        overrides = params.url_overrides()
        values = {s.name: query_value(s.name, getattr(params, s.name)) for s in TOKEN_SPECS
                  if s.name not in PRESET_FILLED or s.name in overrides}
        return cls(values, in_force={n: query_value(n, getattr(params, n)) for n in PRESET_FILLED})

    @classmethod
    def refused(cls, raw: Mapping[str, str], errors: Sequence[Mapping[str, Any]]) -> TokenForm:
        """What was typed, and per field why it was refused (pydantic's message)."""
        named: dict[str, str] = {}
        for err in errors:
            loc = err.get("loc") or ("",)
            named.setdefault(str(loc[0]), str(err.get("msg", "invalid")))
        defaults = cls.from_params(TokenParams())
        return cls({**defaults.values, **raw}, named, in_force=defaults.in_force)

    @property
    def invalid(self) -> bool:
        return bool(self.errors)
