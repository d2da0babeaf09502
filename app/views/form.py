"""The GRPO parameter form: its fields, what each shows, and each field's allowed range."""
from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from ..engine.model import ToyConfig
from ..engine.params import MAX_ABS_REWARD, GRPOParams
from ..engine.processes import GROUP_SIZE
from . import numbers

# The URL parameters of a step are exactly GRPOParams' fields, in its order.
FORM_FIELDS = tuple(GRPOParams.model_fields)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    label: str
    numeric: bool = True
    choices: tuple[str, ...] = ()  # a <select> of these values
    explain: str = ""  # one line under the field: what the choice changes


def _choices(name: str) -> tuple[str, ...]:
    annotation = GRPOParams.model_fields[name].annotation
    if annotation is bool:
        return ("false", "true")
    return tuple(get_args(annotation))


# Display order of the form (the most-changed first); every GRPOParams field once.
FIELDS = (
    FieldSpec("seed", "seed"), FieldSpec("group_size", "group size G"),
    FieldSpec("clip_epsilon", "clip ε"), FieldSpec("beta", "β (reference penalty)"),
    FieldSpec("learning_rate", "learning rate"), FieldSpec("iteration", "iteration"),
    FieldSpec("inner_steps", "inner steps μ"), FieldSpec("inner_step", "inner step"),
    FieldSpec("prompt", "prompt"), FieldSpec("advantage_epsilon", "advantage ε"),
    FieldSpec("rewards", "rewards override", numeric=False),
)
# The conventions where the paper, TRL, verl, Dr. GRPO and DAPO differ (docs/design.md §3).
CONVENTION_SPECS = (
    FieldSpec("preset", "preset", choices=_choices("preset"),
              explain="Fills every convention below; a field you change overrides it."),
    FieldSpec("advantage_std", "advantage std", choices=_choices("advantage_std"),
              explain="Divide A by the population std, the sample (Bessel) std of TRL and verl, or not at all."),
    FieldSpec("clip_epsilon_high", "clip ε high",
              explain="Upper end of the band 1+ε_high; DAPO's clip-higher uses 0.28."),
    FieldSpec("dual_clip", "dual clip c", explain="For A < 0, cap the loss at c·|A| (verl: 3). \"none\": off."),
    FieldSpec("kl_estimator", "KL estimator", choices=_choices("kl_estimator"),
              explain="k1 = −Δ, k2 = Δ²/2, k3 = eΔ − Δ − 1 with Δ = log π_ref − log π."),
    FieldSpec("kl_placement", "KL placement", choices=_choices("kl_placement"),
              explain="In the loss (GRPO), or subtracted from the reward before the advantages (PPO-style)."),
    FieldSpec("kl_bias_correction", "KL × ρ", choices=_choices("kl_bias_correction"),
              explain="TRL's default: the KL term is multiplied by the ratio ρ."),
    FieldSpec("log_ratio_clamp", "log-ratio clamp", explain="Clamp log-ratios to ±this before exp() (verl: 20)."),
    FieldSpec("kl_clamp", "KL clamp", explain="Clamp the KL estimate to ±this (verl: 10)."),
    FieldSpec("loss_aggregation", "loss aggregation", choices=_choices("loss_aggregation"),
              explain="How tokens are averaged. One-token completions: all three agree (up to max_length)."),
    FieldSpec("max_length", "max length", explain="The constant of token_sum_norm; the toy's completions are 1 token."),
)
FIELDS = FIELDS + CONVENTION_SPECS
assert sorted(f.name for f in FIELDS) == sorted(FORM_FIELDS), "the form must show every parameter once"

_STAGE = ToyConfig()
# A process stage runs with its own settings; the form says which.
STAGE_PARAMS_NOTE = (f"G = {GROUP_SIZE}, ε = {numbers.param(_STAGE.clip_epsilon)}, "
                     f"β = {numbers.param(_STAGE.beta)}")


def allowed_range(name: str) -> str | None:
    """Human-readable bounds of a parameter, from its Field constraints."""
    field = GRPOParams.model_fields.get(name)
    if field is None:
        return None
    low = high = None
    for c in field.metadata:
        for attr, sym in (("ge", "<="), ("gt", "<")):
            if getattr(c, attr, None) is not None:
                low = f"{numbers.bound(getattr(c, attr))} {sym} "
        for attr, sym in (("le", "<="), ("lt", "<")):
            if getattr(c, attr, None) is not None:
                high = f" {sym} {numbers.bound(getattr(c, attr))}"
    if name == "rewards":
        return f"group_size comma-separated finite numbers, |r| <= {numbers.bound(MAX_ABS_REWARD)}"
    if low is None and high is None:
        return None
    return f"{low or ''}{name}{high or ''}"


@dataclass
class ParamForm:
    """What the parameter form shows: raw values as typed, and errors by field."""
    values: dict[str, str]
    errors: dict[str, str]
    allowed: dict[str, str | None]
    fields: tuple[FieldSpec, ...] = FIELDS

    @classmethod
    def from_params(cls, params: GRPOParams) -> ParamForm:
        values = {}
        for name in FORM_FIELDS:
            v = getattr(params, name)
            values[name] = ("" if v is None else ",".join(map(numbers.param, v)) if name == "rewards"
                            else str(v).lower() if isinstance(v, (bool, str)) else numbers.param(v))
        return cls(values, {}, {n: allowed_range(n) for n in FORM_FIELDS})

    @classmethod
    def refused(cls, typed: dict[str, str], errors: list[dict]) -> ParamForm:
        """The defaults, overlaid with what was typed, and the first error of each field."""
        form = cls.from_params(GRPOParams())
        form.values.update(typed)
        for err in errors:
            name = str(err["loc"][0]) if err["loc"] else "request"
            form.errors.setdefault(name, err["msg"].removeprefix("Value error, "))
        return form
