"""The GRPO parameter form: its fields, what each shows, and each field's allowed range."""
from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel

from app.engine.grpo.params import CONVENTION_FIELDS, OFF, OPTIONAL_NUMBERS
from app.engine.grpo.presets import DEFAULT_PRESET, PRESET_TITLES
from app.kinds.toy.engine.model import ToyConfig
from app.kinds.toy.engine.params import MAX_ABS_REWARD, STEP_OVERRIDES, GRPOParams
from app.kinds.toy.engine.processes import GROUP_SIZE
from app.views import numbers
from app.views.param_fields import FieldSpec, field_range

# The URL parameters of a step are exactly GRPOParams' fields, in its order.
FORM_FIELDS = tuple(GRPOParams.model_fields)


def _choices(name: str) -> tuple[str, ...]:
    annotation = GRPOParams.model_fields[name].annotation
    if annotation is bool:
        return ("false", "true")
    return tuple(get_args(annotation))


# Display order of the form (the most-changed first); every GRPOParams field once.
SAMPLING_SPECS = (
    FieldSpec("seed", "seed", explain="Seeds the sampling of every group."),
    FieldSpec("group_size", "group size G", explain="Completions sampled per prompt."),
    FieldSpec("prompt", "prompt", explain="Which toy prompt the group answers."),
    FieldSpec("rewards", "rewards override", numeric=False,
              explain="The current group's rewards, one per completion; empty: the accuracy rule."),
    FieldSpec("learning_rate", "learning rate", explain="SGD step of the updates replayed before the shown one."),
    FieldSpec("iteration", "iteration", explain="Earlier GRPO iterations; each re-freezes π_old."),
    FieldSpec("inner_steps", "inner steps μ", explain="Updates per sampled group."),
    FieldSpec("inner_step", "inner step", explain="Updates already made on the current group."),
)
# The conventions where the paper, TRL, verl, Dr. GRPO and DAPO differ (docs/design.md §3);
# the first three always show, the rest fold under "More conventions" until one differs.
CONVENTION_SPECS = (
    FieldSpec("preset", "preset", choices=_choices("preset"),
              labels=tuple(PRESET_TITLES[p] for p in _choices("preset")),
              explain="Fills every convention below; a field you change overrides it."),
    FieldSpec("clip_epsilon", "clip ε", explain="Ratios are clipped to [1−ε, 1+ε_high]."),
    FieldSpec("beta", "β (KL penalty)", explain="Weight of the KL penalty; 0 turns it off."),
    FieldSpec("advantage_std", "advantage std", choices=_choices("advantage_std"),
              explain="Divide A by the population std, the sample (Bessel) std of TRL and verl, or not at all."),
    FieldSpec("advantage_epsilon", "advantage ε_A", explain="Added to the std before dividing (TRL 1e-4, verl 1e-6)."),
    FieldSpec("clip_epsilon_high", "band top ε_high",
              explain="Upper end of the band 1+ε_high; empty: the preset's (DAPO's clip-higher: 0.28), else clip ε."),
    FieldSpec("dual_clip", "dual clip c", explain="For A < 0, cap the loss at c·|A| (verl: 3). \"none\": off."),
    FieldSpec("kl_estimator", "KL estimator", choices=_choices("kl_estimator"),
              explain="k1 = −Δ, k2 = Δ²/2, k3 = eΔ − Δ − 1 with Δ = log π_ref − log π."),
    FieldSpec("kl_placement", "KL placement", choices=_choices("kl_placement"),
              explain="In the loss (GRPO), or subtracted from the reward before the advantages (PPO-style)."),
    FieldSpec("kl_bias_correction", "KL × ρ", choices=_choices("kl_bias_correction"),
              explain="TRL's default: the KL term is multiplied by the ratio ρ (needs KL placement loss)."),
    FieldSpec("log_ratio_clamp", "log-ratio clamp",
              explain="Clamp log-ratios to ±this before exp() (verl: 20). \"none\": off."),
    FieldSpec("kl_clamp", "KL clamp",
              explain="Clamp the k3 estimate to ±this (verl: 10; k1, k2 never). \"none\": off."),
    FieldSpec("loss_aggregation", "loss aggregation", choices=_choices("loss_aggregation"),
              explain="How tokens are averaged. One-token completions: all three agree (up to max_length)."),
    FieldSpec("max_length", "max length", explain="The constant of token_sum_norm; the toy's completions are 1 token."),
    FieldSpec("policy_loss", "policy loss", choices=_choices("policy_loss"),
              explain="clip: min(ρA, clip(ρ)A). cispo: the ratio capped at ε_high (absolute) as a constant "
                      "weight on A·log π, so no answer loses its gradient."),
    FieldSpec("importance_sampling_level", "ratio level", choices=_choices("importance_sampling_level"),
              explain="token, or sequence (GSPO: one ratio per completion, the mean log-ratio of its tokens); "
                      "the toy's one-token answers: the same."),
    FieldSpec("is_correction", "IS correction", choices=_choices("is_correction"),
              explain="TRL's vLLM correction: × π_old/π_sampling per token or sequence, truncated or masked. "
                      "The toy has no rollout engine: weight 1."),
    FieldSpec("is_clip_min", "IS C_min", explain="Lower bound of the IS weight (TRL: none). \"none\": off."),
    FieldSpec("is_clip_max", "IS C_max", explain="Upper bound of the IS weight (TRL: 3). \"none\": off."),
)
ALWAYS_SHOWN = 3  # preset, ε, β: the rest of CONVENTION_SPECS folds away
FIELDS = SAMPLING_SPECS + CONVENTION_SPECS
# The shown update's ε and β are the figure's (views/figure_control.py): the form carries them hidden,
# beside the history's field they stand in for, with a note that says so (StepOverride).
assert sorted(f.name for f in FIELDS) == sorted(set(FORM_FIELDS) - set(STEP_OVERRIDES)), \
    "the form must show every parameter once"
BESIDE = {base: name for name, base in STEP_OVERRIDES.items()}  # "clip_epsilon" -> "step_clip_epsilon"
SYMBOLS = {"clip_epsilon": "ε", "beta": "β"}


@dataclass(frozen=True)
class StepOverride:
    """Beside the form's clip ε (β) field: the figure's value for the shown update, kept as a hidden input
    when set, and a note saying the field sets the earlier updates only. Always drawn (empty when unset),
    so a change at the figure can replace it out of band (toy/figure_fragment.html)."""
    base: str        # the form's field it sits beside
    name: str        # the parameter it carries
    value: str       # "" when the shown update uses the field's value, or when it was refused
    note: str
    error: str = ""  # a refused value: named here, and not carried (Recompute drops it)


def step_override(base: str, values: dict[str, str], errors: dict[str, str]) -> StepOverride:
    name = BESIDE[base]
    value = values.get(name, "")
    if name in errors:
        return StepOverride(base, name, "", "", f"{name} = {value} (the figure's {SYMBOLS[base]} for the shown "
                            f"update) was refused: {errors[name]}. Recompute drops it.")
    note = (f"The figure sets {SYMBOLS[base]} = {value} for the shown update only; this field sets the earlier "
            "updates (the history that samples the group)." if value else "")
    return StepOverride(base, name, value, note)

_STAGE = ToyConfig()
# A process stage runs with its own settings; the form says which.
STAGE_PARAMS_NOTE = (f"G = {GROUP_SIZE}, ε = {numbers.param(_STAGE.clip_epsilon)}, "
                     f"β = {numbers.param(_STAGE.beta)}")


def allowed_range(name: str, model: type[BaseModel] = GRPOParams) -> str | None:
    """Human-readable bounds of one of GRPOParams' fields (or `model`'s)."""
    if name == "rewards" and model is GRPOParams:
        return f"group_size comma-separated finite numbers, |r| <= {numbers.bound(MAX_ABS_REWARD)}"
    return field_range(name, model)


def _form_value(name: str, v: object) -> str:
    if v is None:  # an optional number that is off reads "none", so sending the form keeps it off
        return OFF if name in OPTIONAL_NUMBERS else ""
    if name == "rewards" and isinstance(v, tuple):
        return ",".join(map(numbers.param, v))
    return str(v).lower() if isinstance(v, (bool, str)) else numbers.param(v)


FOLLOWS = "clip_epsilon_high"  # shown empty while it follows clip_epsilon (or its preset's value)
# What each preset puts in the convention fields (static/js/presets.js fills them on a change).
PRESET_VALUES = {p: {n: "" if n == FOLLOWS else _form_value(n, getattr(GRPOParams(preset=p), n))
                     for n in CONVENTION_FIELDS if n != "preset"} for p in _choices("preset")}


@dataclass
class ParamForm:
    """What the parameter form shows: raw values as typed, and errors by field."""
    values: dict[str, str]
    errors: dict[str, str]
    allowed: dict[str, str | None]
    fields: tuple[FieldSpec, ...] = FIELDS
    preset_title: str = PRESET_TITLES[DEFAULT_PRESET]
    overridden: tuple[str, ...] = ()  # conventions the request sets against its preset

    preset_values = PRESET_VALUES
    sampling = SAMPLING_SPECS
    conventions = CONVENTION_SPECS[:ALWAYS_SHOWN]
    more_conventions = CONVENTION_SPECS[ALWAYS_SHOWN:]

    def step_override(self, base: str) -> StepOverride | None:
        """The figure's override beside field `base` (clip_epsilon, beta); None beside any other."""
        return step_override(base, self.values, self.errors) if base in BESIDE else None

    @property
    def more_open(self) -> bool:
        """"More conventions" unfolds when one of its fields differs from the preset or was refused."""
        names = {f.name for f in self.more_conventions}
        return bool(names & (set(self.overridden) | set(self.errors)))

    @classmethod
    def from_params(cls, params: GRPOParams) -> ParamForm:
        values = {name: _form_value(name, getattr(params, name)) for name in FORM_FIELDS}
        overrides = params.url_overrides()
        if FOLLOWS not in overrides:  # empty: the band's top follows clip ε (or the preset) when sent
            values[FOLLOWS] = ""
        overridden = tuple(n for n in params.url_overrides() if n in CONVENTION_FIELDS and n != "preset")
        return cls(values, {}, {n: allowed_range(n) for n in FORM_FIELDS}, preset_title=PRESET_TITLES[params.preset],
                   overridden=overridden)

    @classmethod
    def refused(cls, typed: dict[str, str], errors: list[dict]) -> ParamForm:
        """The defaults (of the typed preset, if it names one), overlaid with what was typed, and the
        first error of each field."""
        preset = typed.get("preset")
        form = cls.from_params(GRPOParams(preset=preset) if preset in PRESET_TITLES else GRPOParams())
        form.values.update(typed)
        form.overridden = tuple(n for n in typed if n in CONVENTION_FIELDS and n != "preset")
        for err in errors:
            name = str(err["loc"][0]) if err["loc"] else "request"
            form.errors.setdefault(name, err["msg"].removeprefix("Value error, "))
        return form
