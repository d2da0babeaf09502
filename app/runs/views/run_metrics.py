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

from app.runs.domain.token_stats import IS_GRAD_METRIC, IS_THRESHOLD

MISMATCH, SIGNAL, SAMPLES = "Train/inference mismatch (per token)", "Gradient signal (per token)", "Samples (per row)"
IS_GRAD = "What IS correction does to the gradient (per token)"
SECTIONS = ("Diagnostics", MISMATCH, IS_GRAD, SIGNAL, "Rewards", "Completion lengths", SAMPLES, "Optimiser", "Other")

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
# UNIPO's canonical files (poloclub/unipo, docs/canonical_schema.json: every entry's `metrics` holds at least
# policy_objective and reward); its reward, reward_std, kl and learning_rate share TRL's names and words above.
WORDS |= {
    "policy_objective": ("Optimiser", "UNIPO's policy objective J for the update (the loss is its negative): near 0 "
                                      "by construction when advantages are centred."),
    "policy_loss": ("Optimiser", "The policy loss of the update (UNIPO: minus the policy objective)."),
    "clip_fraction": ("Diagnostics", "Share of tokens whose ratio ρ was clipped (outside [1 − ε, 1 + ε] on the side "
                                     "the advantage pushes). 0 whenever ρ = 1 (one update per batch)."),
    "advantage_mean": ("Rewards", "Mean advantage over the update's completions: about 0 when each group's rewards "
                                  "are centred."),
    "advantage_std": ("Rewards", "Standard deviation of the advantages over the update's completions."),
    "response_length": ("Completion lengths", "Mean response length in tokens."),
}
# Derived by this app from the frameworks' per-token files (domain/token_stats.py says how and why), trained
# tokens only (the loss mask applied) unless the name says otherwise.
WORDS |= {
    "tokens/mismatch_kl": (MISMATCH, "Mean k3 KL between the trainer's and the inference engine's log-probs, "
                                     "exp(d) − d − 1 with d = log π_trainer − log π_rollout, over trained tokens."),
    "tokens/mismatch_kl_mask_blind": (MISMATCH, "The same KL over every token, masked ones too: what a view that "
                                                "ignores the loss mask reports. Not a real mismatch."),
    "tokens/mismatch_mean": (MISMATCH, "Mean of d = log π_trainer − log π_rollout over trained tokens (nats)."),
    "tokens/mismatch_abs_p99": (MISMATCH, "99th percentile of |d| over trained tokens (nats)."),
    "tokens/mismatch_abs_max": (MISMATCH, "Largest |d| of any trained token (nats)."),
    "tokens/outside_is_band": (MISMATCH, "Share of trained tokens whose ratio π_trainer/π_rollout is outside "
                                         "[0.5, 2], where truncated or masked IS acts."),
    "tokens/seq_outside_is_band": (MISMATCH, "Share of sequences whose geometric-mean ratio is outside [0.5, 2]: "
                                             "what a sequence-level IS mask would drop."),
    "tokens/tis_weight_scale": (MISMATCH, "Σ|A|·min(ρ, 2) / Σ|A|: how truncated IS rescales the policy "
                                          "gradient's weight (1: not at all)."),
    "tokens/nonfinite_logprobs": (MISMATCH, "Trained tokens whose log-prob the file had as non-finite (left out)."),
    "tokens/carry_gradient": (SIGNAL, "Share of trained tokens that carry gradient: advantage not 0 and not "
                                      "dropped by the trainer's IS mask."),
    "tokens/zero_advantage": (SIGNAL, "Share of trained tokens with advantage exactly 0 (tied groups): no "
                                      "gradient."),
    "tokens/is_masked": (SIGNAL, "Share of trained tokens the trainer's own IS/trust-region mask dropped "
                                 "(prime-rl's is_masked)."),
    "tokens/loss_masked": (SIGNAL, "Share of response tokens the loss mask removed (removed or masked samples)."),
    "tokens/truncated": (SIGNAL, "Share of sequences that hit the length limit."),
    "tokens/trained_tokens": (SIGNAL, "Trained tokens in the step (loss mask 1, log-probs finite)."),
    "tokens/sequences": (SIGNAL, "Sequences in the step's per-token files."),
    "tokens/entropy_mean": (SIGNAL, "Mean per-token entropy of the trainer's policy over trained tokens."),
    # per-sample files: TRL's completions tables, verl's rollout dumps (domain/trl_completions.py, verl_rollouts.py)
    "samples/count": (SAMPLES, "Completions in the step's per-sample file."),
    "samples/reward_mean": (SAMPLES, "Mean total reward over the step's completions (verl: its score, the reward "
                                     "before any KL penalty)."),
    "samples/reward_std": (SAMPLES, "Standard deviation of that reward over the whole step (Bessel-corrected)."),
    "samples/groups": (SAMPLES, "Prompts in the step: the completions that share one prompt are its GRPO group."),
    "samples/tied_group_share": (SAMPLES, "Share of groups (2 or more scored completions) whose scores are all "
                                          "equal: their GRPO advantage is 0, no gradient."),
    "samples/tied_sample_share": (SAMPLES, "Share of the step's completions that sit in such a tied group."),
    "samples/zero_advantage_share": (SAMPLES, "Share of completions whose logged advantage is exactly 0."),
    "samples/unscorable_share": (SAMPLES, "Share of completions no reward function scored (None, NaN)."),
    "samples/completion_chars_mean": (SAMPLES, "Mean completion length in characters (the file holds no tokens)."),
    # slime's rollout dumps (Sample.to_dict(): domain/slime_samples.py)
    "samples/truncated_share": (SAMPLES, "Share of the step's completions that stopped at the length limit (slime's "
                                         "Sample status \"truncated\"): their reward judges an unfinished answer."),
    "samples/response_length_mean": (SAMPLES, "Mean completion length in tokens (slime's response_length)."),
}
# engine/is_effect.py: each correction recomputed on the step's trained tokens, against none (ρ = π_trainer/π_rollout;
# Πρ: the product over a sequence's trained tokens). mode -> (name, its weight, where its bound binds)
_C, _LOW = f"{IS_THRESHOLD:g}", f"{1 / IS_THRESHOLD:g}"
_CORRECTIONS = {
    "token_truncate": ("truncated IS per token", f"weight min(ρ, {_C}), TIS", f"ρ > {_C}"),
    "token_mask": ("masked IS per token", f"weight ρ, 0 outside [{_LOW}, {_C}]", f"ρ outside [{_LOW}, {_C}]"),
    "sequence_truncate": ("truncated IS per sequence", f"each token weighted min(Πρ, {_C}) of its sequence",
                          f"their sequence's Πρ > {_C}"),
    "sequence_mask": ("masked IS per sequence", f"each token weighted Πρ of its sequence, 0 outside [{_LOW}, {_C}]",
                      f"their sequence's Πρ outside [{_LOW}, {_C}]"),
}
for _mode, (_name, _weight, _bound) in _CORRECTIONS.items():
    _share, _does = ("dropped_share", "sets to 0") if _mode.endswith("mask") else ("capped_share", f"caps at {_C}")
    WORDS |= {
        IS_GRAD_METRIC.format(mode=_mode, stat="norm_ratio"): (IS_GRAD, (
            f"Length of the step's gradient ∂loss/∂log π under {_name} ({_weight}) over its length with no "
            "correction, recomputed: 1 is the same size.")),
        IS_GRAD_METRIC.format(mode=_mode, stat="cosine"): (IS_GRAD, (
            f"Cosine between the gradient under {_name} and the uncorrected one: 1 is the same direction.")),
        IS_GRAD_METRIC.format(mode=_mode, stat=_share): (IS_GRAD, (
            f"Share of the uncorrected gradient's mass Σ|∂loss/∂log π| on the tokens {_name} {_does} ({_bound}).")),
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
    if name.startswith("samples/"):  # per-row numbers from a per-sample file, not described above
        return MetricWords(SAMPLES, "")
    return MetricWords("Other", "")


__all__ = ["SECTIONS", "MetricWords", "metric_words"]
