"""The tiny-LM walkthrough's story: what each of its seven steps teaches. Each step's focus
figure is the token panel (tiny_lm/token_panel.html), showing the number the step introduces
under every token (token_steps.STEP_METRIC), in the first view next to the sentence."""
from __future__ import annotations

from app.views.story import StepStory

STORIES = {
    "sample": StepStory(
        "The tiny model writes G answers to one addition, one token at a time, in digits or a second script "
        "(a–j for 0–9: f+j=be is 5+9=14); each token's log π under the old policy that sampled it is the number "
        "GRPO will later reweight.",
        focus="sampled-tokens", step_fields=("seed", "group_size"),
        evidence="the token strips: every completion, each token with its log π_old"),
    "rewards": StepStory(
        "A rule scores each whole answer (is the sum right, does it end properly, is it in one script), so a "
        "reward belongs to a completion, never to one token.",
        focus="completion-rewards", step_fields=("reward_parts",),
        evidence="each completion's verdict and reward r beside its tokens"),
    "advantages": StepStory(
        "A completion's advantage is its reward minus the group's mean, divided by the group's spread, and "
        "every token of that completion gets that same advantage; padding gets none.",
        focus="token-advantages", step_fields=("group_size",),
        evidence="the A under every token: one value per completion, repeated along it"),
    "ratio": StepStory(
        "Per token, the ratio compares the updated policy with the one that sampled it; where it leaves "
        "[1 − ε, 1 + ε] in the direction the advantage pushes, the clip stops that token's push (✂).",
        focus="token-ratios", form_open=True, step_fields=("clip_epsilon", "inner_steps", "learning_rate"),
        evidence="the ρ under every token, ✂ where the clip binds"),
    "kl": StepStory(
        "A per-token KL penalty (the k3 estimate, weighted by β) pulls every token back toward the reference "
        "model, clipped or not.",
        focus="token-kl", step_fields=("beta",),
        evidence="the per-token KL under every token"),
    "aggregation": StepStory(
        "How per-token losses are averaged (per completion, over all tokens, or by a fixed length) decides "
        "how much a long answer's tokens weigh.",
        focus="aggregation", step_fields=("loss_aggregation",),
        evidence="the per-token gradients and the three aggregations' losses"),
    "update": StepStory(
        "One optimiser step: tokens of positive-advantage answers mostly become more likely and negative ones "
        "less, but shared parameters and the KL term can move any token either way.",
        focus="update", step_fields=("learning_rate",),
        evidence="Δ log π under every token after the step"),
}
