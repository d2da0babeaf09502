"""What each metric TRL's GRPOTrainer logs means, and which part of the explorer it goes in.

Names as TRL 1.16 writes them in `log_history` (trl/trainer/grpo_trainer.py, `_metrics` and `log`):
the sections put the diagnostics practitioners ask about first (tied groups, truncation, clipping,
KL, entropy), then rewards, lengths and the optimiser's numbers. A name not known here (a reward
function's own `rewards/<name>/mean`, a metric of a newer TRL) is still drawn, in "Other", with no
sentence: every logged metric is shown, none invented.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SECTIONS = ("Diagnostics", "Rewards", "Completion lengths", "Optimiser", "Other")

WORDS: dict[str, tuple[str, str]] = {
    "frac_reward_zero_std": ("Diagnostics", "Share of groups whose G rewards were all equal: their advantages are 0, "
                                            "so they give no gradient."),
    "completions/clipped_ratio": ("Diagnostics", "Share of completions cut at max_completion_length (no EOS)."),
    "clip_ratio/region_mean": ("Diagnostics", "Share of tokens whose ratio ρ left [1 − ε, 1 + ε] where the clip "
                                              "takes effect. 0 whenever ρ = 1 (num_iterations = 1)."),
    "clip_ratio/low_mean": ("Diagnostics", "Share of tokens clipped below 1 − ε (negative advantage)."),
    "clip_ratio/low_min": ("Diagnostics", "The lowest per-device share clipped below 1 − ε."),
    "clip_ratio/high_mean": ("Diagnostics", "Share of tokens clipped above 1 + ε (positive advantage)."),
    "clip_ratio/high_max": ("Diagnostics", "The highest per-device share clipped above 1 + ε."),
    "kl": ("Diagnostics", "Mean per-token KL to the reference model (k3 estimator), logged when β > 0."),
    "entropy": ("Diagnostics", "Mean per-token entropy of the policy over the completions: its fall is the "
                               "policy growing sure of its tokens."),
    "reward": ("Rewards", "Mean total reward of the step's completions (the weighted sum of the reward "
                          "functions)."),
    "reward_std": ("Rewards", "Standard deviation of the rewards over the step's whole batch (TRL >= 0.27; "
                   "older TRL logged the mean of each group's std)."),
    "completions/mean_length": ("Completion lengths", "Mean completion length in tokens."),
    "completions/min_length": ("Completion lengths", "Shortest completion of the step."),
    "completions/max_length": ("Completion lengths", "Longest completion of the step."),
    "completions/mean_terminated_length": ("Completion lengths", "Mean length of the completions that ended "
                                                                 "with EOS."),
    "completions/min_terminated_length": ("Completion lengths", "Shortest completion that ended with EOS."),
    "completions/max_terminated_length": ("Completion lengths", "Longest completion that ended with EOS."),
    "loss": ("Optimiser", "The logged GRPO loss (rounded to 4 decimals by transformers' Trainer). Its value is "
                          "near 0 by construction; its gradient is not."),
    "grad_norm": ("Optimiser", "Norm of the gradient before clipping (max_grad_norm)."),
    "learning_rate": ("Optimiser", "The scheduler's learning rate at the step."),
    "num_tokens": ("Optimiser", "Tokens seen so far (prompts and completions)."),
    "epoch": ("Optimiser", "Epochs of the training set so far."),
    "step_time": ("Optimiser", "Seconds the step took."),
}
_REWARD_FUNC = re.compile(r"rewards/(?P<name>[^/]+)/(?P<stat>mean|std)\Z")


@dataclass(frozen=True)
class MetricWords:
    section: str
    sentence: str  # "" when this metric's meaning is not known here


def metric_words(name: str) -> MetricWords:
    if name in WORDS:
        return MetricWords(*WORDS[name])
    m = _REWARD_FUNC.match(name)
    if m:
        what = "mean" if m["stat"] == "mean" else "standard deviation"
        return MetricWords("Rewards", f"The {what} over the step's completions of the reward function "
                                      f"{m['name']!r}, before weighting.")
    return MetricWords("Other", "")


__all__ = ["SECTIONS", "MetricWords", "metric_words"]
