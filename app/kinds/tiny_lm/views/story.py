"""The tiny-LM walkthrough's story: what each of its seven steps teaches. Each step's focus
figure is the token panel (tiny_lm/token_panel.html), showing the number the step introduces
under every token (token_steps.STEP_METRIC), in the first view next to the sentence."""
from __future__ import annotations

from app.views.story import StepStory

STORIES = {
    "sample": StepStory(
        "The tiny model writes G answers to one addition, one token at a time; each token's log π_old is "
        "the number GRPO will later reweight.",
        more="It writes in digits or a second script (a–j for 0–9: f+j=be is 5+9=14); π_old is the policy "
             "that sampled the tokens, frozen for this step.",
        focus="sampled-tokens", step_fields=("seed", "group_size"),
        evidence="the token strips: every completion, each token with its log π_old"),
    "rewards": StepStory(
        "A rule scores each whole answer, so a reward belongs to a completion, never to one token.",
        more="Its parts ask whether the sum is right, whether the answer ends properly and whether it keeps to "
             "one script.",
        focus="completion-rewards", step_fields=("reward_parts",),
        evidence="each completion's verdict and reward r beside its tokens"),
    "advantages": StepStory(
        "Every token of a completion gets that completion's advantage: its reward minus the group's mean, "
        "over the group's spread.",
        more="Padding after an answer's end gets none, so within one completion no token is credited more "
             "than another.",
        focus="token-advantages", step_fields=("group_size",),
        evidence="the A under every token: one value per completion, repeated along it"),
    "ratio": StepStory(
        "Where a token's ratio leaves [1 − ε, 1 + ε] in the direction its advantage pushes, the clip stops "
        "that token's push (✂).",
        more="Per token, the ratio compares the updated policy with the one that sampled it.",
        focus="token-ratios", form_open=True, step_fields=("clip_epsilon", "inner_steps", "learning_rate"),
        evidence="the ρ under every token, ✂ where the clip binds"),
    "kl": StepStory(
        "A per-token KL penalty, weighted by β, pulls every token back toward the reference model, clipped "
        "or not.",
        more="It is the k3 estimate, from the policy's and the reference model's log-probabilities of each "
             "sampled token.",
        focus="token-kl", step_fields=("beta",),
        evidence="the per-token KL under every token"),
    "aggregation": StepStory(
        "How per-token losses are averaged decides how much a long answer's tokens weigh.",
        more="Per completion, over all tokens, or by a fixed length: three aggregations of the same tokens "
             "give three losses.",
        focus="aggregation", step_fields=("loss_aggregation",),
        evidence="the per-token gradients and the three aggregations' losses"),
    "update": StepStory(
        "One optimiser step makes tokens of positive-advantage answers mostly more likely, and negative ones "
        "less.",
        more="Mostly, not always: shared parameters and the KL term can move any token either way.",
        focus="update", step_fields=("learning_rate",),
        evidence="Δ log π under every token after the step"),
}
