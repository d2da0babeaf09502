"""What each node of the tiny-LM walkthrough's graph means: names, formulas and
one plain sentence, per token. The graph is TinyLMGRPO's export (app/engine/tiny_lm_grpo.py);
its module templates are recognised by class, its layers by their place in a block.
"""
from __future__ import annotations

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.views.meaning import NodeMeaning
from app.views.token_head_meaning import HEAD_MODULES, LOSS_WORDS, SYMBOL, head_formula, scoring_copy

MARKER = "model::ScoredLM"  # a template only this graph has
ROLE = {
    "policy": "the model being trained; the only copy gradients reach",
    "old_policy": "a frozen copy from when the group was sampled; it gives the ratio's denominator",
    "reference_policy": "a frozen copy of the base model; the KL penalty keeps the policy near it",
}

# template -> (name, formula, sentence); "{s}" is the copy's symbol, "{role}" what the copy is for;
# the GRPO head's templates (and each copy's log-probs) are the token head's words, shared with the real model
MODULES = {**HEAD_MODULES,
    "model::ScoredLM": (
        "{name} (tiny LM)", "log {s}(o_t | q, o_<t) for every completion token t",
        "The tiny decoder-only transformer: token and position embeddings, 2 blocks of attention and MLP, "
        "a final norm and the LM head, then each completion token's log-probability: {role}."),
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
    **LOSS_WORDS,
}


def is_tiny_lm_graph(snapshot: Snapshot) -> bool:
    return MARKER in snapshot.module_template_ids


def tiny_lm_meaning(node: Node) -> tuple[str, str | None, str] | None:
    """(name, formula, sentence) for a node of the tiny-LM graph, or None for the generic words."""
    copy = scoring_copy(node.node_id)
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
    return NodeMeaning(name, head_formula(node.metadata.module_template_id, formula, conventions), summary)
