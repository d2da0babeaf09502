"""A recorded step's story: what each of its five steps teaches about the user's own run. Each
step's focus figure is drawn by step_record/focus.html from the record screen (screen.py)."""
from __future__ import annotations

from app.views.story import StepStory

STORIES = {
    "group": StepStory(
        "A completion's advantage is its reward measured against its own group's rewards.",
        more="Your step starts from groups: one prompt, G sampled completions, each scored by your reward "
             "functions.",
        focus="record-group", evidence="the group table: each completion's tokens, rewards by function, advantage"),
    "ratio": StepStory(
        "Where a token's ratio ρ leaves the clip band in the direction its advantage pushes, the clip stops "
        "that token's push (✂).",
        more="Per token, ρ = π_θ/π_old says how far the policy moved since it sampled that token.",
        focus="record-tokens", form_open=True, step_fields=("clip_epsilon", "clip_epsilon_high", "policy_loss",
                                                            "importance_sampling_level"),
        evidence="the ρ under every token of the window, ✂ where the clip binds; clip fractions against the log"),
    "kl": StepStory(
        "The KL term, weighted by β, pulls each token back toward the reference model.",
        more="It is computed per token from the recorded reference log-probs, where the record has them.",
        focus="record-tokens", step_fields=("beta", "kl_estimator"),
        evidence="the KL under every token of the window and the mean KL against the logged one"),
    "loss": StepStory(
        "The aggregation turns every token's term into one loss, checked here against the number your "
        "framework logged.",
        more="Torch recomputes it from your recorded log-probs and compares it key by key.",
        focus="record-checks", form_open=True, step_fields=("loss_aggregation", "advantage_std"),
        evidence="logged against recomputed, key by key, with the relative difference"),
    "diagnostics": StepStory(
        "Each finding answers a question people ask of a GRPO step, with its numbers.",
        more="Is a loss of 0 training? Why is the clip ratio 0? Each finding links to where this page shows it.",
        focus="record-diagnostics", evidence="one sentence per finding, each with a link"),
}

# The token strip's number on each step (the reader may switch to any other)
STEP_METRIC = {"group": "advantage", "ratio": "ratio", "kl": "kl", "loss": "grad", "diagnostics": "grad"}
