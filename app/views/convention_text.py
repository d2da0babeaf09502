"""The formulas and sentences that change with the loss conventions (docs/design.md §3).

Where the GRPO paper, TRL, verl, Dr. GRPO and DAPO differ (app/engine/params.py `Conventions`),
the Inspector's formulas, the group table and the line under the loss say which choice is in
force. Under the paper's conventions (the default) every formula is the one docs/design.md §3
writes, symbol for symbol; a departure is spelt with its number ("1+0.28", "floored at 3·A_i").

`filled_line` writes one sample's formula with its recorded numbers: nothing here computes a
number the engine did not record (app/views/numbers.py spells them).
"""
from __future__ import annotations

from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.engine.grpo.presets import PRESET_TITLES
from app.views.numbers import MINUS, param, significant

STD_SYMBOL = {"population": "std_pop", "sample": "std_sample"}
STD_WORDS = {"population": "÷ population std", "sample": "÷ sample std (Bessel)", "none": "centred only, no ÷ std"}
AGGREGATION_WORDS = {"sample_mean": "mean per completion, then over the group",
                     "token_mean": "mean over all tokens of the group",
                     "token_sum_norm": "token sums ÷ (G·max_length)"}
# How a field is named when the request overrides its preset.
FIELD_NAMES = {
    "advantage_std": "advantage std", "advantage_epsilon": "ε_A", "clip_epsilon": "ε",
    "clip_epsilon_high": "ε_high", "dual_clip": "dual clip c", "beta": "β", "kl_estimator": "KL estimator",
    "kl_placement": "KL placement", "kl_bias_correction": "KL × ρ", "log_ratio_clamp": "log-ratio clamp",
    "kl_clamp": "KL clamp", "loss_aggregation": "aggregation", "max_length": "max_length",
    "policy_loss": "policy loss", "importance_sampling_level": "ratio level", "is_correction": "IS correction",
    "is_clip_min": "IS C_min", "is_clip_max": "IS C_max",
}
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _value(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return value if isinstance(value, str) else param(value)


# ---------------------------------------------------------------- the general formulas

def advantage_formula(c: Conventions) -> str:
    r = "r'" if c.kl_placement == "reward" else "r"
    centred = f"{r}_i {MINUS} mean({r})"
    body = centred if c.advantage_std == "none" else f"({centred}) / ({STD_SYMBOL[c.advantage_std]}({r}) + ε_A)"
    if c.kl_placement == "reward":
        return f"A_i = {body}, r'_i = r_i {MINUS} β·D_i(π_old)"
    return f"A_i = {body}"


def ratio_formula(c: Conventions) -> str:
    log_ratio = f"log π_θ(o_i|q) {MINUS} log π_old(o_i|q)"
    if c.importance_sampling_level == "sequence":  # GSPO: the mean over the completion's tokens
        log_ratio = f"(1/|o_i|) Σ_t (log π_θ(o_i,t) {MINUS} log π_old(o_i,t))"
    if c.log_ratio_clamp is None:
        return f"ρ_i = exp({log_ratio})"
    return f"ρ_i = exp(clamp({log_ratio}, ±{param(c.log_ratio_clamp)}))"


def is_words(c: Conventions) -> str:
    """The IS correction in a few words ("" when off): what multiplies each token's policy term."""
    if c.is_correction == "none":
        return ""
    level, how = c.is_correction.split("_")
    bounds = f"[{param(c.is_clip_min) if c.is_clip_min is not None else 0}, " \
             f"{param(c.is_clip_max) if c.is_clip_max is not None else '∞'}]"
    what = "truncated to" if how == "truncate" else "0 outside"
    return f"IS: × π_old/π_sampling per {level}, {what} {bounds}"


def clipped_formula(c: Conventions) -> str:
    if c.policy_loss == "cispo":
        cap = param(c.clip_epsilon_high)
        return f"L_i = sg(min(ρ_i, {cap}))·A_i·log π_θ(o_i|q) (CISPO: the capped ratio a constant)"
    if c.clip_epsilon_high == c.clip_epsilon:
        band = f"1{MINUS}ε, 1+ε"
    else:
        band = f"1{MINUS}{param(c.clip_epsilon)}, 1+{param(c.clip_epsilon_high)}"
    text = f"L_i = min(ρ_i·A_i, clip(ρ_i, {band})·A_i)"
    if c.dual_clip is not None:
        text += f", floored at {param(c.dual_clip)}·A_i where A_i < 0 (dual clip)"
    return text


def kl_clamps(c: Conventions) -> tuple[float | None, float | None]:
    """(log-ratio bound, value bound) the KL really uses: verl's clamps guard k3's exp() only."""
    return (c.log_ratio_clamp, c.kl_clamp) if c.kl_estimator == "k3" else (None, None)


def divergence_formula(c: Conventions) -> str:
    pi = "π_old" if c.kl_placement == "reward" else "π_θ"
    delta = f"log π_ref {MINUS} log {pi}"
    ratio_bound, kl_bound = kl_clamps(c)
    if c.kl_estimator == "k3" and ratio_bound is None and kl_bound is None:
        return f"D_i = exp({delta}) {MINUS} ({delta}) {MINUS} 1"
    value = {"k1": f"{MINUS}Δ_i", "k2": "Δ_i²/2", "k3": f"exp(Δ_i) {MINUS} Δ_i {MINUS} 1"}[c.kl_estimator]
    if kl_bound is not None:
        value = f"clamp({value}, ±{param(kl_bound)})"
    where = f"Δ_i = {delta}" if ratio_bound is None else f"Δ_i = clamp({delta}, ±{param(ratio_bound)})"
    return f"D_i = {value} ({c.kl_estimator}), {where}"


def objective_term(c: Conventions) -> str:
    if c.kl_placement == "reward":
        return "L_i"
    return f"L_i {MINUS} β·ρ_i·D_i" if c.kl_bias_correction else f"L_i {MINUS} β·D_i"


def objective_formula(c: Conventions) -> str:
    if c.kl_placement == "reward":
        return f"L_i {MINUS} β·0 = L_i (the KL went into the reward)"
    if c.kl_bias_correction:
        return f"L_i {MINUS} β·ρ_i·D_i (× ρ: TRL's bias correction)"
    return objective_term(c)


def loss_formula(c: Conventions) -> str:
    term = objective_term(c)
    term = term if term == "L_i" else f"({term})"
    if c.loss_aggregation == "sample_mean":
        return f"loss = {MINUS}J = {MINUS}(1/G) Σ_i {term}"
    weight = ("1/Σ_j |o_j| = 1/G" if c.loss_aggregation == "token_mean"
              else f"1/(G·max_length) = 1/(G·{c.max_length})")
    return f"loss = {MINUS}J = {MINUS}Σ_i w_i·{term}, w_i = {weight}"


FORMULAS = {"advantages": advantage_formula, "ratio": ratio_formula, "clipped": clipped_formula,
            "divergence": divergence_formula, "objective": objective_formula, "output": loss_formula}


def aggregation_note(c: Conventions, group_size: int) -> str:
    """One sentence: with one-token completions the three aggregations coincide."""
    same = f"1/G = {significant(1 / group_size, 4, strip=True)}"
    if c.loss_aggregation == "token_sum_norm" and c.max_length != 1:
        return (f"Each completion is one token long, so the three aggregations differ only by a constant: "
                f"token_sum_norm weighs each completion 1/(G·max_length) = "
                f"{significant(1 / (group_size * c.max_length), 4, strip=True)} where sample_mean and token_mean "
                f"give {same}.")
    return (f"Each completion is one token long, so sample_mean, token_mean and token_sum_norm (with "
            f"max_length 1) coincide here: every completion weighs {same}; they differ on longer answers "
            f"(Dr. GRPO, DAPO).")


def summary(key: str, c: Conventions) -> str | None:
    """The node's one sentence where a convention changes what it means; None: the paper's sentence."""
    if key == "advantages":
        what = ("each answer's reward minus β times its old policy's drift" if c.kl_placement == "reward"
                else "each answer's reward")
        if c.advantage_std == "none":
            return (f"How much better {what} is than its group's average, not divided by the group's spread "
                    "(Dr. GRPO): positive means “do more of this”, negative “do less”.")
        if c.kl_placement == "reward":
            return (f"How much better {what} is than its group's average, in units of the group's spread: "
                    "positive means “do more of this”, negative “do less”.")
    if key == "clipped" and c.policy_loss == "cispo":
        return (f"Each answer's push, its advantage times its log-probability, weighted by its ratio capped at "
                f"{param(c.clip_epsilon_high)} and held constant (CISPO): a capped answer still gets a gradient.")
    if key == "clipped" and (c.dual_clip is not None or c.clip_epsilon_high != c.clip_epsilon):
        band = f"[{param(1 - c.clip_epsilon)}, {param(1 + c.clip_epsilon_high)}]"
        floor = (f", and for a negative advantage never below {param(c.dual_clip)}·A so that one unlikely answer "
                 "cannot dominate" if c.dual_clip is not None else "")
        return (f"Each answer's push, ratio times advantage, capped once the ratio leaves {band} in the "
                f"direction the advantage pushes, so that one update cannot overshoot{floor}.")
    if key == "divergence":
        pi = "old policy" if c.kl_placement == "reward" else "policy"
        where = (", subtracted from its reward before the advantages (so no gradient flows through it)"
                 if c.kl_placement == "reward" else "")
        shape = {"k1": "the plain log-ratio, right on average but negative for some answers",
                 "k2": "half the squared log-ratio, never negative",
                 "k3": "never negative, and 0 where the two agree"}[c.kl_estimator]
        if c.kl_estimator != "k3" or c.kl_placement == "reward":
            return f"A per-answer estimate of how far the {pi} has drifted from the reference policy ({shape}){where}."
    if key == "objective":
        if c.kl_placement == "reward":
            return ("Each answer's capped push alone, since the drift penalty already lowered its reward; "
                    "training raises the average of these.")
        if c.kl_bias_correction:
            return ("Each answer's capped push minus β times its drift penalty, the penalty multiplied by the "
                    "ratio ρ as TRL does by default; training raises the average of these.")
    if key == "output" and c.loss_aggregation != "sample_mean":
        return ("The one number training lowers: minus the per-sample objectives, weighted by what the "
                f"aggregation gives each ({AGGREGATION_WORDS[c.loss_aggregation]}).")
    return None


# ---------------------------------------------------------------- which conventions are in force

def overrides(params: Conventions) -> dict[str, object]:
    """The conventions the request sets against its preset."""
    return {k: v for k, v in params.url_overrides().items() if k in CONVENTION_FIELDS and k != "preset"}


def conventions_line(params: Conventions) -> str:
    """ "Conventions: TRL 1.16 defaults (β overridden to 0.04)". """
    changed = overrides(params)
    title = PRESET_TITLES[params.preset]
    if not changed:
        return f"Conventions: {title}."
    parts = [f"{FIELD_NAMES.get(k, k)} {'overridden ' if n == 0 else ''}to {_value(v)}"
             for n, (k, v) in enumerate(changed.items())]
    return f"Conventions: {title} ({', '.join(parts)})."


def in_force(c: Conventions, group_size: int) -> str:
    """Every convention in one line, labelled: what a student needs to read the table."""
    std = ("advantage: r − mean(r), no ÷ std" if c.advantage_std == "none" else
           f"advantage: (r − mean) ÷ ({c.advantage_std} std + {param(c.advantage_epsilon)})")
    band = f"clip: ρ kept in [{param(1 - c.clip_epsilon)}, {param(1 + c.clip_epsilon_high)}]"
    if c.dual_clip is not None:
        band += f", floor {param(c.dual_clip)}·A for A < 0"
    if c.policy_loss == "cispo":
        band = f"CISPO: sg(min(ρ, {param(c.clip_epsilon_high)}))·A·log π"
    if c.importance_sampling_level == "sequence":
        band += " (ρ per completion: GSPO)"
    kl = f"KL: β = {param(c.beta)} × {c.kl_estimator}" + (" × ρ" if c.kl_bias_correction else "")
    kl += " in the reward" if c.kl_placement == "reward" else " in the loss"
    kl_bound = kl_clamps(c)[1]
    clamps = ", ".join(p for p in (
        f"log-ratio ±{param(c.log_ratio_clamp)}" if c.log_ratio_clamp is not None else "",
        f"KL ±{param(kl_bound)}" if kl_bound is not None else "") if p)
    share = significant(1 / group_size, 4, strip=True)
    if c.loss_aggregation == "token_sum_norm" and c.max_length != 1:
        weight = significant(1 / (group_size * c.max_length), 4, strip=True)
        agg = (f"aggregation: token_sum_norm, w = 1/(G·{c.max_length}) = {weight} (one-token answers: the other "
               f"two give 1/G = {share})")
    else:
        agg = (f"aggregation: {c.loss_aggregation} (one-token answers: all three give each completion "
               f"w = 1/G = {share})")
    return " · ".join(p for p in (std, band, kl, f"clamps: {clamps}" if clamps else "", is_words(c), agg) if p)


# ---------------------------------------------------------------- one sample's numbers

def _n(value: float) -> str:
    return significant(value, 4)


def _term(value: float) -> str:
    """A number after a minus or a times sign: negative ones in parentheses."""
    return f"({_n(value)})" if _n(value).startswith(MINUS) else _n(value)


def _clamped(expression: str, bound: float | None, hit: bool) -> str:
    return f"clamp({expression}, {MINUS}{param(bound)}, {param(bound)})" if hit and bound is not None else expression


def needs(kind: str, c: Conventions) -> tuple[str, ...]:
    """The recorded numbers (and flags) `filled_line` reads for a formula under `c`."""
    pi = "logp_old" if c.kl_placement == "reward" else "logp"
    return {
        "ratio": ("logp", "logp_old", "ratio"),
        "clipped": ("ratio", "advantage", "clipped") + (("logp",) if c.policy_loss == "cispo" else ()),
        "divergence": ("logp_ref", pi, "divergence"),
        "objective": ("clipped", "divergence", "objective") + (("kl_rho_factor",) if c.kl_bias_correction else ()),
    }[kind]


def filled_line(kind: str, i: int, v: dict[str, float], flags: dict[str, bool], c: Conventions) -> str:
    """Sample i's formula with its recorded numbers `v`; `flags` says which clamp bound."""
    k = str(i).translate(_SUBSCRIPTS)
    if kind == "ratio":
        log_ratio = _clamped(f"{_n(v['logp'])} {MINUS} {_term(v['logp_old'])}", c.log_ratio_clamp,
                             flags.get("ratio_clamped", False))
        return f"ρ{k} = exp({log_ratio}) = {_n(v['ratio'])}"
    if kind == "clipped":
        rho, a = _n(v["ratio"]), _term(v["advantage"])
        if c.policy_loss == "cispo":
            return (f"L{k} = sg(min({rho}, {param(c.clip_epsilon_high)})) · {a} · {_term(v['logp'])} "
                    f"= {_n(v['clipped'])}")
        low, high = param(c.clip_epsilon), param(c.clip_epsilon_high)
        text = f"min({rho} · {a}, clip({rho}, 1 {MINUS} {low}, 1 + {high}) · {a})"
        if c.dual_clip is not None and v["advantage"] < 0:
            text = f"max({text}, {param(c.dual_clip)} · {a})"
        return f"L{k} = {text} = {_n(v['clipped'])}"
    if kind == "divergence":
        pi = "logp_old" if c.kl_placement == "reward" else "logp"
        ratio_bound, kl_bound = kl_clamps(c)
        delta = _clamped(f"{_n(v['logp_ref'])} {MINUS} {_term(v[pi])}", ratio_bound,
                         flags.get("kl_log_ratio_clamped", False))
        value = {"k1": f"{MINUS}({delta})", "k2": f"({delta})² / 2",
                 "k3": f"exp({delta}) {MINUS} ({delta}) {MINUS} 1"}[c.kl_estimator]
        value = _clamped(value, kl_bound, flags.get("kl_clamped", False))
        return f"D{k} = {value} = {_n(v['divergence'])}"
    # the objective term
    beta = param(c.beta)
    if c.kl_placement == "reward":
        return f"L{k} {MINUS} β·0 = {_n(v['clipped'])} {MINUS} {beta} · 0 = {_n(v['objective'])}"
    if c.kl_bias_correction:
        return (f"L{k} {MINUS} β·ρ{k}·D{k} = {_n(v['clipped'])} {MINUS} {beta} · {_term(v['kl_rho_factor'])} · "
                f"{_term(v['divergence'])} = {_n(v['objective'])}")
    return f"L{k} {MINUS} β·D{k} = {_n(v['clipped'])} {MINUS} {beta} · {_term(v['divergence'])} = {_n(v['objective'])}"
