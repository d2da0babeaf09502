"""A recorded run's conventions in one line of plain words (what its loss did), for the page's head."""
from __future__ import annotations

from app.engine.grpo.params import Conventions
from app.views.numbers import param

AGGREGATION = {"sample_mean": "mean per completion, then over completions (GRPO paper, TRL grpo)",
               "token_mean": "mean over all tokens (DAPO, TRL dapo/bnpo, verl token-mean)",
               "token_sum_norm": "token sum ÷ (G·max length) (Dr. GRPO)"}


def conventions_words(c: Conventions, token_normalizer: float | None = None) -> str:
    if c.policy_loss == "cispo":
        loss = f"CISPO: sg(min(ρ, {param(c.clip_epsilon_high)}))·A·log π"
    else:
        loss = f"clipped surrogate, ρ kept in [{param(1 - c.clip_epsilon)}, {param(1 + c.clip_epsilon_high)}]"
        if c.dual_clip is not None:
            loss += f", dual clip {param(c.dual_clip)}"
    level = "ratio per completion (GSPO)" if c.importance_sampling_level == "sequence" else "ratio per token"
    kl = "no KL (β = 0)" if c.beta == 0 else \
        f"KL: β = {param(c.beta)} × {c.kl_estimator}" + (" × ρ" if c.kl_bias_correction else "")
    adv = ("A = r − mean(r)" if c.advantage_std == "none" else
           f"A = (r − mean) ÷ ({c.advantage_std} std + {param(c.advantage_epsilon)})")
    agg = AGGREGATION[c.loss_aggregation]
    if token_normalizer is not None and c.loss_aggregation == "token_mean":
        agg = f"token sum ÷ {param(token_normalizer)} (the framework's token count)"
    parts = [loss, level, kl, adv, f"aggregation: {agg}"]
    if c.is_correction != "none":
        bounds = ", ".join(p for p in (f"min {param(c.is_clip_min)}" if c.is_clip_min is not None else "",
                                       f"max {param(c.is_clip_max)}" if c.is_clip_max is not None else "") if p)
        parts.append(f"rollout IS correction: {c.is_correction}" + (f" ({bounds})" if bounds else ""))
    return " · ".join(parts) + "."
