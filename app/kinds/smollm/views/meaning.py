"""What each node of the real model's graph means: SmolLM2's Llama (app/engine/lm/decoder.py) by template and by
its layer's place in a block, and the token-level GRPO head in the words every token kind shares
(app/views/token_head_meaning.py)."""
from __future__ import annotations

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.views.meaning import NodeMeaning
from app.views.numbers import MINUS
from app.views.token_head_meaning import HEAD_MODULES, LOSS_WORDS, SYMBOL, head_formula, scoring_copy

SCORER = "model::ScoredDecoder"  # a template only this graph has
# the same module in exports made before issue 48 named it after its class then (ScoredLlama): still ours
MARKERS = frozenset({SCORER, "model::ScoredLlama"})
ROLE = {
    "policy": "the copy being trained; the only one gradients reach",
    "old_policy": "the checkpoint as it sampled the group, frozen; it gives the ratio's denominator",
    "reference_policy": "the checkpoint, frozen; the KL penalty keeps the policy near it",
}
MODULES = {**HEAD_MODULES,
    "model::TokenLogProbs": (  # the shared words, with the temperature this model's log-probs are read at
        "Token log-probs log {s}", f"log {{s}}(o_t) = z_t[o_t]/τ {MINUS} log Σ_v exp(z_t[v]/τ)",
        "The log-softmax of each position's next-token scores over τ, the sampling temperature (as TRL and "
        "verl score: the distribution the answers were drawn from), read at the token that actually came "
        "next: one number per completion token, 0 on padding once masked."),
    SCORER: (
        "{name} (SmolLM2-135M)", "log {s}(o_t | q, o_<t) for every answer token t",
        "SmolLM2-135M-Instruct: the token embedding, 30 Llama blocks, a final RMSNorm and the LM head (tied to "
        "the embedding), then each answer token's log-probability: {role}."),
    "model::Block": (
        "Llama block", "x ← x + attention(RMSNorm(x)); x ← x + MLP(RMSNorm(x))",
        "Pre-norm residual block: attention lets each position read earlier ones, the SwiGLU MLP transforms "
        "each position on its own; both add to the residual stream of 576 numbers."),
    "model::Attention": (
        "Grouped-query attention", "softmax(RoPE(q)·RoPE(k)ᵀ/√64, causal)·v",
        "9 query heads of 64 numbers share 3 key/value heads (3 queries per key); each position mixes the "
        "values of itself and earlier positions. Select the softmax to see the weights."),
    "model::MLP": (
        "SwiGLU MLP", "down(SiLU(gate(x)) ⊙ up(x))",
        "Widens each position to 1,536 numbers twice, gates one by the other, narrows back to 576."),
    "model::RMSNorm": (
        "RMSNorm", "x / √(mean(x²) + ε) ⊙ g", "Rescales each position's vector to unit root-mean-square, then "
        "by learned gains."),
    "model::RotaryEmbedding": (
        "Rotary position embedding", "rotate pairs (i, i + 32) of q and k by angle t·θ_i",
        "Turns each query and key by an angle that grows with its position, so q·k depends on how far apart "
        "two tokens are."),
}
LAYERS = {  # the last part of a layer's id -> (name, formula, sentence)
    "embed": ("Token embedding", "x_t = E[o_t]", "Looks up 576 numbers for each of 49,152 token ids."),
    "q": ("Queries", "q = W_q x", "576 → 9 heads × 64 numbers per position."),
    "k": ("Keys", "k = W_k x", "576 → 3 heads × 64 numbers per position (shared by 3 query heads each)."),
    "v": ("Values", "v = W_v x", "576 → 3 heads × 64 numbers per position."),
    "o": ("Attention output", "y = W_o·(heads joined)", "Mixes the 9 heads' results back into 576 numbers."),
    "gate": ("MLP gate", "g = W_gate x", "576 → 1,536 numbers per position, passed through SiLU."),
    "up": ("MLP up", "u = W_up x", "576 → 1,536 numbers per position."),
    "down": ("MLP down", "y = W_down h", "1,536 → 576 numbers per position."),
    "lm_head": ("LM head (next-token scores)", "z_t = Eᵀ x_t", "One score per vocabulary token (49,152): the "
                "logits; its weights are the embedding's."),
}
CALLS = {  # op -> (name, formula, sentence) for the calls inside a block
    "torch.nn.functional.softmax": (
        "Attention weights", "softmax(q·kᵀ/√64) over earlier positions",
        "For each head and position, how much it reads each earlier position: each row sums to 1. The "
        "attention step draws them as a map."),
    "torch.nn.functional.silu": ("SiLU", "SiLU(g) = g·σ(g)", "The MLP's smooth gate."),
    "torch.mul": ("Gate ⊙ up", "h = SiLU(g) ⊙ u", "The gated product the MLP narrows back."),
}
TOP = {
    "Input": ("Token ids, mask and rewards", None,
              "The group as data: the chat-formatted prompt plus right-padded answers (token ids), the 0/1 "
              "mask of real answer tokens, and each answer's reward."),
    **LOSS_WORDS,
}


def smollm_meaning(node: Node) -> tuple[str, str | None, str] | None:
    copy = scoring_copy(node.node_id)
    fill = {"s": SYMBOL[copy], "role": ROLE[copy], "name": copy.replace("_", " ").capitalize()}
    suffix = "" if copy == "policy" else f" of {SYMBOL[copy]}"
    template = node.metadata.module_template_id
    if template in MARKERS:
        template = SCORER
    if template in MODULES:
        name, formula, sentence = MODULES[template]
        name = name.format(**fill)
        return (name if template in HEAD_MODULES or template in MARKERS else name + suffix,
                formula.format(**fill) if formula else None, sentence.format(**fill))
    if node.op == "Python":
        owner = node.node_id.removeprefix("python@").split("#")[0]
        return (f"The {owner} expression", None, "The module's one statement; it shows the module's output.")
    if node.op == "torch.matmul":
        first = node.node_id.endswith("#0")
        return (("Attention scores q·kᵀ" if first else "Weighted values") + suffix,
                "s = q·kᵀ / √64" if first else "y = softmax(s)·v",
                "Each query head against every key: how well each position matches each earlier one." if first
                else "Each position's mix of the values, by its attention weights.")
    if node.op in CALLS:
        name, formula, sentence = CALLS[node.op]
        return name + suffix, formula, sentence
    if node.op == "torch.add":  # a residual add (app/engine/lm/decoder.py uses torch.add so each is a node)
        n = int(node.node_id.rsplit("#", 1)[-1]) if "#" in node.node_id else 0
        return (("+ attention (residual)" if n == 0 else "+ MLP (residual)") + suffix,
                "x ← x + attention(RMSNorm(x))" if n == 0 else "x ← x + MLP(RMSNorm(x))",
                "The residual stream: the block's input passes straight through and the "
                + ("attention's" if n == 0 else "MLP's") + " output is added to it.")
    if node.parent_id is None and node.op in TOP:
        return TOP[node.op]
    last = node.node_id.rsplit(".", 1)[-1]
    if last in LAYERS:
        name, formula, sentence = LAYERS[last]
        return name + suffix, formula, sentence
    return None


def describe_smollm(snapshot: Snapshot, node: Node, conventions: Conventions | None = None,
                    group_size: int | None = None) -> NodeMeaning | None:
    """The real model's words for a node of its graph (None for any other graph, or a node it does not know)."""
    if MARKERS.isdisjoint(snapshot.module_template_ids) or (words := smollm_meaning(node)) is None:
        return None
    name, formula, summary = words
    return NodeMeaning(name, head_formula(node.metadata.module_template_id, formula, conventions), summary)
