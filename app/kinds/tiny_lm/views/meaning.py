"""What each node of the tiny-LM walkthrough's graph means: names, formulas and
one plain sentence, per token. The graph is TinyLMGRPO's export (app/engine/tiny_lm_grpo.py);
its module templates are recognised by class, its layers by their place in a block.
"""
from __future__ import annotations

import re

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.views import convention_text as ct
from app.views.meaning import NodeMeaning
from app.views.numbers import MINUS

MARKER = "model::ScoredLM"  # a template only this graph has
SYMBOL = {"policy": "π_θ", "old_policy": "π_old", "reference_policy": "π_ref"}
ROLE = {
    "policy": "the model being trained; the only copy gradients reach",
    "old_policy": "a frozen copy from when the group was sampled; it gives the ratio's denominator",
    "reference_policy": "a frozen copy of the base model; the KL penalty keeps the policy near it",
}

# template -> (name, formula, sentence); "{s}" is the copy's symbol, "{role}" what the copy is for
MODULES = {
    "model::ScoredLM": (
        "{name} (tiny LM)", "log {s}(o_t | q, o_<t) for every completion token t",
        "The tiny decoder-only transformer: token and position embeddings, 2 blocks of attention and MLP, "
        "a final norm and the LM head, then each completion token's log-probability: {role}."),
    "model::TokenLogProbs": (
        "Token log-probs log {s}", f"log {{s}}(o_t) = z_t[o_t] {MINUS} log Σ_v exp(z_t[v])",
        "The log-softmax of each position's next-token scores, read at the token that actually came "
        "next: one number per completion token, 0 on padding once masked."),
    "model::Block": (
        "Transformer block", "x ← x + attention(norm(x)); x ← x + MLP(norm(x))",
        "Pre-norm residual block: attention lets each position read earlier ones, the MLP transforms "
        "each position on its own; both add to the residual stream."),
    "model::CausalSelfAttention": (
        "Causal self-attention", "softmax(q·kᵀ/√d, masked to earlier positions)·v",
        "4 heads; each position mixes the values of itself and earlier positions, weighted by how its "
        "query matches their keys. Select the softmax to see the weights."),
    "model::MLP": (
        "MLP", "down(GELU(up(x)))", "Widens each position to 256 numbers, bends them with GELU, narrows back to 64."),
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
LAYERS = {  # the last part of a layer's id -> (name, formula, sentence)
    "embed": ("Token embedding", "x_t = E[o_t]", "Looks up a 64-number vector for each token id (28 tokens)."),
    "position": ("Position embedding", "x_t += P[t]", "Adds a vector for each position, so order is known."),
    "norm_1": ("LayerNorm before attention", None, "Rescales each position's vector to mean 0, spread 1."),
    "norm_2": ("LayerNorm before the MLP", None, "Rescales each position's vector to mean 0, spread 1."),
    "norm": ("Final LayerNorm", None, "Rescales each position's vector before the LM head."),
    "qkv": ("Queries, keys, values", "[q, k, v] = W x + b",
            "One linear map makes each position's query, key and value."),
    "out": ("Attention output", "y = W·(heads joined) + b", "Mixes the 4 heads' results back into 64 numbers."),
    "up": ("MLP up", "h = W x + b", "64 → 256 numbers per position."),
    "act": ("GELU", None, "The MLP's smooth non-linearity."),
    "down": ("MLP down", "y = W h + b", "256 → 64 numbers per position."),
    "lm_head": ("LM head (next-token scores)", "z_t = W x_t", "One score per vocabulary token: the logits."),
}
TOP = {
    "Input": ("Token ids, mask and rewards", None,
              "The group as data: prompt plus right-padded completions (token ids), the 0/1 mask of real "
              "tokens, and each completion's reward."),
    "torch.neg": ("Loss = −J", f"loss = {MINUS}J", "The one number training lowers."),
    "Output": ("Loss", f"loss = {MINUS}J", "What the step returns: its gradient reaches every weight of π_θ."),
}


def is_tiny_lm_graph(snapshot: Snapshot) -> bool:
    return MARKER in snapshot.module_template_ids


def _copy(node_id: str) -> str:
    root = node_id.split("@", 1)[-1].split(".", 1)[0].split("#")[0]
    return root if root in SYMBOL else "policy"


def tiny_lm_meaning(node: Node) -> tuple[str, str | None, str] | None:
    """(name, formula, sentence) for a node of the tiny-LM graph, or None for the generic words."""
    copy = _copy(node.node_id)
    fill = {"s": SYMBOL[copy], "role": ROLE[copy], "name": copy.replace("_", " ").capitalize()}
    template = node.metadata.module_template_id
    if template in MODULES:
        name, formula, sentence = MODULES[template]
        return name.format(**fill), formula.format(**fill) if formula else None, sentence.format(**fill)
    if node.op == "Python":
        owner = node.node_id.removeprefix("python@").split("#")[0]
        return (f"The {owner} expression", None, "The module's one statement; it shows the module's output.")
    if node.op == "torch.nn.functional.softmax":
        return ("Attention weights", "softmax(q·kᵀ/√d) over earlier positions",
                "For each head and position, how much it reads each earlier position: each row sums to 1. "
                "The inspector draws them as a map.")
    if node.op == "torch.add":  # a residual add (engine/tiny_lm.py uses torch.add so each is a node)
        n = int(node.node_id.rsplit("#", 1)[-1]) if "#" in node.node_id else 0
        suffix = "" if copy == "policy" else f" of {SYMBOL[copy]}"
        if ".blocks." not in node.node_id:
            return ("+ token and position" + suffix, "x_t = E[o_t] + P[t]",
                    "Adds each token's position vector to its token vector: the start of the residual stream.")
        return (("+ attention (residual)" if n == 0 else "+ MLP (residual)") + suffix,
                "x ← x + attention(norm(x))" if n == 0 else "x ← x + MLP(norm(x))",
                "The residual stream: the block's input passes straight through and the "
                + ("attention's" if n == 0 else "MLP's") + " output is added to it.")
    if node.parent_id is None and node.op in TOP:
        return TOP[node.op]
    last = node.node_id.rsplit(".", 1)[-1]
    if last in LAYERS:
        name, layer_formula, sentence = LAYERS[last]
        suffix = "" if copy == "policy" else f" of {SYMBOL[copy]}"
        return name + suffix, layer_formula, sentence
    return None


def describe_tiny_lm(snapshot: Snapshot, node: Node, conventions: Conventions | None = None,
                     group_size: int | None = None) -> NodeMeaning | None:
    """The tiny LM's words for a node of its graph (None for any other graph, or a node it does not
    know). The GRPO head's formulas follow the conventions in force, as the toy's do."""
    if not is_tiny_lm_graph(snapshot) or (words := tiny_lm_meaning(node)) is None:
        return None
    name, formula, summary = words
    key = HEAD_CONVENTIONS.get(node.metadata.module_template_id or "")
    if conventions is not None and key is not None:
        written = ct.FORMULAS[key](conventions)
        if written != ct.FORMULAS[key](PAPER):  # the paper's stays in the per-token words above
            formula = per_token(written) + (", then A_i,t = A_i for each token" if key == "advantages" else "")
    return NodeMeaning(name, formula, summary)


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
