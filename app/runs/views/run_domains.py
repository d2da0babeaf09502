"""Where each logged metric can lie, so a chart's y axis never shows what the metric cannot be (issue 50).

A share (a fraction of tokens, completions or groups) lies in [0, 1]: its axis is padded inside [0, 1], so a
clip ratio stuck at 0 is drawn on 0..1, not −0.5..0.5, and a clipped share of 1.0 does not reach 1.5. A count,
a length, a norm, a standard deviation, an entropy, a k3 KL or a ratio ρ is never negative: its axis starts at
0 at the lowest. A cosine lies in [−1, 1]. The rest (the loss, a reward, an advantage's mean, a log-ratio) may
take any sign: padded freely. The bound limits the padding only: a value past it (a KL of −1e-9 from float
rounding) is still drawn, the axis reaching it.
"""
from __future__ import annotations

import re

Domain = tuple[float | None, float | None]  # (lowest, highest); None: unbounded on that side
SHARE: Domain = (0.0, 1.0)
NON_NEGATIVE: Domain = (0.0, None)
COSINE: Domain = (-1.0, 1.0)
FREE: Domain = (None, None)

# Each name's domain from its meaning (views/run_metrics.py says what each is): TRL 1.16's GRPOTrainer,
# UNIPO's canonical names, and the app's own per-token and per-sample numbers.
DOMAINS: dict[str, Domain] = {
    # shares: a mean of 0/1 indicators (TRL: `.float().mean()` of a mask, per token or per completion/group)
    "frac_reward_zero_std": SHARE, "completions/clipped_ratio": SHARE, "clip_ratio": SHARE,
    "cispo_clip_ratio": SHARE, "clip_fraction": SHARE,
    "tokens/outside_is_band": SHARE, "tokens/seq_outside_is_band": SHARE, "tokens/carry_gradient": SHARE,
    "tokens/zero_advantage": SHARE, "tokens/is_masked": SHARE, "tokens/loss_masked": SHARE,
    "tokens/truncated": SHARE,
    # never negative: k3 KL (exp(d) − d − 1 ≥ 0) and entropy; counts, lengths, time, the optimiser's norms and rate;
    # ρ-based weights and |d| statistics
    "kl": NON_NEGATIVE, "entropy": NON_NEGATIVE, "reward_std": NON_NEGATIVE, "grad_norm": NON_NEGATIVE,
    "learning_rate": NON_NEGATIVE, "num_tokens": NON_NEGATIVE, "epoch": NON_NEGATIVE, "step_time": NON_NEGATIVE,
    "response_length": NON_NEGATIVE, "advantage_std": NON_NEGATIVE,
    "tokens/mismatch_kl": NON_NEGATIVE, "tokens/mismatch_kl_mask_blind": NON_NEGATIVE,
    "tokens/mismatch_abs_p99": NON_NEGATIVE, "tokens/mismatch_abs_max": NON_NEGATIVE,
    "tokens/tis_weight_scale": NON_NEGATIVE, "tokens/nonfinite_logprobs": NON_NEGATIVE,
    "tokens/trained_tokens": NON_NEGATIVE, "tokens/sequences": NON_NEGATIVE, "tokens/entropy_mean": NON_NEGATIVE,
    "samples/count": NON_NEGATIVE, "samples/groups": NON_NEGATIVE, "samples/completion_chars_mean": NON_NEGATIVE,
    "samples/advantage_abs_mean": NON_NEGATIVE,
}
# By the name's shape, for families: every clip ratio (TRL's clip_ratio/low_mean, …/high_max), every share
# (samples/…_share, the IS-effect's capped_share and dropped_share); lengths; every standard deviation; the
# IS-effect's norm ratio (a ratio of norms) and cosine; TRL's sampling ratio ρ statistics (ρ = exp(·) > 0).
PATTERNS: tuple[tuple[re.Pattern[str], Domain], ...] = (
    (re.compile(r"clip_ratio/"), SHARE),
    (re.compile(r"_share\Z|/\w*_share\Z"), SHARE),
    (re.compile(r"(?:/|_)std\Z"), NON_NEGATIVE),
    (re.compile(r"\Acompletions/.*length\Z"), NON_NEGATIVE),
    (re.compile(r"/norm_ratio\Z|\Asampling/importance_sampling_ratio/"), NON_NEGATIVE),
    (re.compile(r"/cosine\Z"), COSINE),
)


def metric_domain(name: str) -> Domain:
    if name in DOMAINS:
        return DOMAINS[name]
    return next((d for p, d in PATTERNS if p.search(name)), FREE)


__all__ = ["COSINE", "DOMAINS", "FREE", "NON_NEGATIVE", "SHARE", "Domain", "metric_domain"]
