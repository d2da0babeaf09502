"""The words for the token-level GRPO head (app/engine/grpo/token_objective.py), shared by every kind whose
graph holds it: per template, a name, a formula and one plain sentence;
"{s}" is the scoring copy's symbol. The head's formulas follow the conventions in force (per_token writes
views/convention_text.py's per-sample formula per token)."""
from __future__ import annotations

import re

from app.engine.grpo.params import Conventions
from app.views import convention_text as ct
from app.views.numbers import MINUS

# The three scoring copies of a token GRPO graph, by the root of their node ids
SYMBOL = {"policy": "π_θ", "old_policy": "π_old", "reference_policy": "π_ref"}
# The loss at the graph's top level, as every token kind's graph ends
LOSS_WORDS = {
    "torch.neg": ("Loss = −J", f"loss = {MINUS}J", "The one number training lowers."),
    "Output": ("Loss", f"loss = {MINUS}J", "What the step returns: its gradient reaches every weight of π_θ."),
}


def scoring_copy(node_id: str) -> str:
    """Which copy a node belongs to (policy, old_policy, reference_policy); the head's nodes: the policy."""
    root = node_id.split("@", 1)[-1].split(".", 1)[0].split("#")[0]
    return root if root in SYMBOL else "policy"


HEAD_MODULES = {
    "model::TokenLogProbs": (
        "Token log-probs log {s}", f"log {{s}}(o_t) = z_t[o_t] {MINUS} log Σ_v exp(z_t[v])",
        "The log-softmax of each position's next-token scores, read at the token that actually came "
        "next: one number per completion token, 0 on padding once masked."),
    "model::GroupAdvantages": (
        "Group advantages A", f"A_i = (r_i {MINUS} mean(r)) / (std(r) + ε), then A_i,t = A_i for each token",
        "How much better each completion's reward is than its group's average; every token of the "
        "completion gets that advantage."),
    "model::PolicyRatio": (
        "Per-token ratio ρ", f"ρ_i,t = exp(log π_θ(o_i,t) {MINUS} log π_old(o_i,t))",
        "How many times more likely the policy now makes each sampled token than the sampler did; 1 = unchanged."),
    "model::ClippedSurrogate": (
        "Clipped surrogate L (per token)", f"L_i,t = min(ρ_i,t·A_i, clip(ρ_i,t, 1{MINUS}ε, 1+ε)·A_i)",
        "Each token's push, ratio times advantage, capped once its ratio leaves the band in the "
        "advantage's direction: a capped token gets no gradient."),
    "model::ReferencePenalty": (
        "KL per token D", f"D_i,t = exp(log π_ref {MINUS} log π_θ) {MINUS} (log π_ref {MINUS} log π_θ) {MINUS} 1",
        "A per-token estimate of how far the policy has drifted from the reference: ≥ 0, and 0 where they agree."),
    "model::LossAggregation": (
        "Loss aggregation J", f"J = Σ_i Σ_t w_i,t·(L_i,t {MINUS} β·D_i,t)",
        "Adds the per-token objectives up with weights w set by the aggregation: per completion then per "
        "group (paper), over all tokens (DAPO), or over a fixed length (Dr. GRPO)."),
}

# The GRPO head's templates and the shared formula text (views/convention_text.py) that writes
# each one under the conventions in force, per sample; `per_token` indexes it by token.
HEAD_CONVENTIONS = {"model::GroupAdvantages": "advantages", "model::PolicyRatio": "ratio",
                    "model::ClippedSurrogate": "clipped", "model::ReferencePenalty": "divergence"}
PAPER = Conventions()
_PER_SAMPLE = re.compile(r"\b(ρ|L|D|Δ)_i(?!,t|\w)")


def per_token(formula: str) -> str:
    """ "ρ_i = exp(log π_θ(o_i|q) − …)" -> "ρ_i,t = exp(log π_θ(o_i,t) − …)": the advantage stays
    the completion's (A_i), every other per-sample symbol gets the token's index."""
    return _PER_SAMPLE.sub(r"\1_i,t", formula).replace("(o_i|q)", "(o_i,t)")


def head_formula(template: str | None, formula: str | None, conventions: Conventions | None) -> str | None:
    """A head node's formula under the conventions in force: the words' own (the paper's) unless the
    conventions write it otherwise."""
    key = HEAD_CONVENTIONS.get(template or "")
    if conventions is None or key is None:
        return formula
    written = ct.FORMULAS[key](conventions)
    if written == ct.FORMULAS[key](PAPER):  # the paper's stays in the per-token words
        return formula
    return per_token(written) + (", then A_i,t = A_i for each token" if key == "advantages" else "")
