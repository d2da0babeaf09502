"""What each node of the real model's graph means: the shared decoder (app/engine/lm/decoder.py, a Llama, Qwen2
or Qwen3) by template and by its layer's place in a block, with this model's sizes as its graph states them
(views/model_facts.py), and the token-level GRPO head in the words every token kind shares
(app/views/token_head_meaning.py)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.kinds.smollm.views.model_facts import ModelFacts, model_facts
from app.views.meaning import NodeMeaning
from app.views.numbers import MINUS
from app.views.token_head_meaning import HEAD_MODULES, LOSS_WORDS, SYMBOL, head_formula, scoring_copy

SCORER = "model::ScoredDecoder"  # a template only this graph has
# the same module in exports made before issue 48 named it after its class then (ScoredLlama): still ours
MARKERS = frozenset({SCORER, "model::ScoredLlama"})
NORM = "model::RMSNorm"
QK_NORMS = ("q_norm", "k_norm")  # Qwen3's per-head norms: RMSNorm modules of their own inside attention
ROLE = {
    "policy": "the copy being trained; the only one gradients reach",
    "old_policy": "the checkpoint as it sampled the group, frozen; it gives the ratio's denominator",
    "reference_policy": "the checkpoint, frozen; the KL penalty keeps the policy near it",
}
Words = dict[str, tuple[str, str | None, str]]  # a key -> (name, formula, sentence)
TOKEN_LOG_PROBS: Words = {  # the shared words, with the temperature this model's log-probs are read at
    "model::TokenLogProbs": (
        "Token log-probs log {s}", f"log {{s}}(o_t) = z_t[o_t]/τ {MINUS} log Σ_v exp(z_t[v]/τ)",
        "The log-softmax of each position's next-token scores over τ, the sampling temperature (as TRL and "
        "verl score: the distribution the answers were drawn from), read at the token that actually came "
        "next: one number per completion token, 0 on padding once masked."),
}
CALLS: Words = {  # op -> words, for the calls inside a block that name no size
    "torch.nn.functional.silu": ("SiLU", "SiLU(g) = g·σ(g)", "The MLP's smooth gate."),
    "torch.mul": ("Gate ⊙ up", "h = SiLU(g) ⊙ u", "The gated product the MLP narrows back."),
}
TOP = {
    "Input": ("Token ids, mask and rewards", None,
              "The group as data: the chat-formatted prompt plus right-padded answers (token ids), the 0/1 "
              "mask of real answer tokens, and each answer's reward."),
    **LOSS_WORDS,
}


@dataclass(frozen=True)
class ModelWords:
    """One model's words, by where smollm_meaning looks them up. Module words may hold "{s}", "{role}" and
    "{name}" (the scoring copy's symbol, role and name), filled per node."""
    modules: Words  # by template
    layers: Words  # by a layer's id's last part
    calls: Words  # by op
    scores: tuple[str, str, str]  # the attention's first matmul, q·kᵀ


def _n(count: int) -> str:
    return f"{count:,}"


def _literal(text: str) -> str:
    """A model's name kept as written when its words are later filled with str.format."""
    return text.replace("{", "{{").replace("}", "}}")


def _attention_words(m: ModelFacts) -> tuple[tuple[str, str, str], Words]:
    """The attention module's words and its projections' (q, k, v, o and Qwen3's q/k norms), by this model's
    heads: H query heads of D numbers sharing K key/value heads, q/k/v biases, per-head q/k norms."""
    c, d, kv = _n(m.n_embd), m.head_dim, m.n_kv_head
    norm = "RMSNorm({})" if m.qk_norm else "{}"
    formula = f"softmax(RoPE({norm.format('q')})·RoPE({norm.format('k')})ᵀ/√{d}, causal)·v"
    shared = (f"share {kv} key/value heads ({m.group} queries per key)" if m.group > 1
              else "each read a key/value head of their own")
    sentence = (f"{m.n_head} query heads of {d} numbers {shared}; each position mixes the values of itself and "
                "earlier positions. Select the softmax to see the weights.")
    if m.qkv_bias:
        sentence += " q, k and v each add a learned bias."
    if m.qk_norm:
        sentence += f" Each head's q and k are RMS-normed over their {d} numbers before RoPE."
    name = "Grouped-query attention" if m.group > 1 else "Multi-head attention"
    bias = ", plus a learned bias" if m.qkv_bias else ""
    keys = f" (shared by {m.group} query heads each)" if m.group > 1 else ""

    def projection(part: str) -> str:
        return f"{part} = W_{part} x" + (f" + b_{part}" if m.qkv_bias else "")

    def head_norm(part: str, whose: str) -> tuple[str, str, str]:
        return (f"{whose.capitalize()} norm (per head)", f"{part}_h ← {part}_h / √(mean({part}_h²) + ε) ⊙ g",
                f"Rescales each {whose} head's {d} numbers to unit root-mean-square, then by learned gains every "
                "head shares; before RoPE, so the scores stay in range.")
    return (name, formula, sentence), {
        "q": ("Queries", projection("q"), f"{c} → {m.n_head} heads × {d} numbers per position{bias}."),
        "k": ("Keys", projection("k"), f"{c} → {kv} heads × {d} numbers per position{keys}{bias}."),
        "v": ("Values", projection("v"), f"{c} → {kv} heads × {d} numbers per position{bias}."),
        "o": ("Attention output", "y = W_o·(heads joined)", f"Mixes the {m.n_head} heads' results back into {c} "
              "numbers."),
        "q_norm": head_norm("q", "query"),
        "k_norm": head_norm("k", "key"),
    }


@lru_cache(maxsize=16)
def words_for(m: ModelFacts) -> ModelWords:
    """The words of the model `m` describes (ModelFacts is frozen, so each model's are built once)."""
    c, f, d = _n(m.n_embd), _n(m.ffn_dim), m.head_dim
    attention, projections = _attention_words(m)
    who = _literal(m.name if m.named else "The model")
    head = "tied to the embedding" if m.tie_embeddings else "its own weights"
    modules: Words = {**HEAD_MODULES, **TOKEN_LOG_PROBS,
        SCORER: (
            f"{{name}} ({_literal(m.short_name)})", "log {s}(o_t | q, o_<t) for every answer token t",
            f"{who}: the token embedding, {m.n_layer} {m.family} blocks, a final RMSNorm and the LM head ({head}), "
            "then each answer token's log-probability: {role}."),
        "model::Block": (
            f"{m.family} block", "x ← x + attention(RMSNorm(x)); x ← x + MLP(RMSNorm(x))",
            "Pre-norm residual block: attention lets each position read earlier ones, the SwiGLU MLP transforms "
            f"each position on its own; both add to the residual stream of {c} numbers."),
        "model::Attention": attention,
        "model::MLP": (
            "SwiGLU MLP", "down(SiLU(gate(x)) ⊙ up(x))",
            f"Widens each position to {f} numbers twice, gates one by the other, narrows back to {c}."),
        NORM: (
            "RMSNorm", "x / √(mean(x²) + ε) ⊙ g", "Rescales each position's vector to unit root-mean-square, then "
            "by learned gains."),
        "model::RotaryEmbedding": (
            "Rotary position embedding", f"rotate pairs (i, i + {d // 2}) of q and k by angle t·θ_i",
            "Turns each query and key by an angle that grows with its position, so q·k depends on how far apart "
            "two tokens are."),
    }
    layers: Words = {
        "embed": ("Token embedding", "x_t = E[o_t]", f"Looks up {c} numbers for each of {_n(m.vocab_size)} token ids."),
        **projections,
        "gate": ("MLP gate", "g = W_gate x", f"{c} → {f} numbers per position, passed through SiLU."),
        "up": ("MLP up", "u = W_up x", f"{c} → {f} numbers per position."),
        "down": ("MLP down", "y = W_down h", f"{f} → {c} numbers per position."),
        "lm_head": ("LM head (next-token scores)", "z_t = Eᵀ x_t" if m.tie_embeddings else "z_t = W_head x_t",
                    f"One score per vocabulary token ({_n(m.vocab_size)}): the logits; "
                    + ("its weights are the embedding's." if m.tie_embeddings
                       else "its weights are its own, not the embedding's.")),
    }
    calls: Words = {**CALLS, "torch.nn.functional.softmax": (
        "Attention weights", f"softmax(q·kᵀ/√{d}) over earlier positions",
        "For each head and position, how much it reads each earlier position: each row sums to 1. The "
        "attention step draws them as a map.")}
    scores = ("Attention scores q·kᵀ", f"s = q·kᵀ / √{d}",
              "Each query head against every key: how well each position matches each earlier one.")
    return ModelWords(modules, layers, calls, scores)


def smollm_meaning(node: Node, words: ModelWords) -> tuple[str, str | None, str] | None:
    copy = scoring_copy(node.node_id)
    fill = {"s": SYMBOL[copy], "role": ROLE[copy], "name": copy.replace("_", " ").capitalize()}
    suffix = "" if copy == "policy" else f" of {SYMBOL[copy]}"
    template = node.metadata.module_template_id
    last = node.node_id.rsplit(".", 1)[-1]
    if template in MARKERS:
        template = SCORER
    if template == NORM and last in QK_NORMS:  # an RMSNorm module, but per head: words of its own
        name, formula, sentence = words.layers[last]
        return name + suffix, formula, sentence
    if template in words.modules:
        name, formula, sentence = words.modules[template]
        name = name.format(**fill)
        return (name if template in HEAD_MODULES or template == SCORER else name + suffix,
                formula.format(**fill) if formula else None, sentence.format(**fill))
    if node.op == "Python":
        owner = node.node_id.removeprefix("python@").split("#")[0]
        return (f"The {owner} expression", None, "The module's one statement; it shows the module's output.")
    if node.op == "torch.matmul":
        if node.node_id.endswith("#0"):
            name, formula, sentence = words.scores
            return name + suffix, formula, sentence
        return ("Weighted values" + suffix, "y = softmax(s)·v",
                "Each position's mix of the values, by its attention weights.")
    if node.op in words.calls:
        name, formula, sentence = words.calls[node.op]
        return name + suffix, formula, sentence
    if node.op == "torch.add":  # a residual add (app/engine/lm/decoder.py uses torch.add so each is a node)
        n = int(node.node_id.rsplit("#", 1)[-1]) if "#" in node.node_id else 0
        return (("+ attention (residual)" if n == 0 else "+ MLP (residual)") + suffix,
                "x ← x + attention(RMSNorm(x))" if n == 0 else "x ← x + MLP(RMSNorm(x))",
                "The residual stream: the block's input passes straight through and the "
                + ("attention's" if n == 0 else "MLP's") + " output is added to it.")
    if node.parent_id is None and node.op in TOP:
        return TOP[node.op]
    if last in words.layers:
        name, formula, sentence = words.layers[last]
        return name + suffix, formula, sentence
    return None


def describe_smollm(snapshot: Snapshot, node: Node, conventions: Conventions | None = None,
                    group_size: int | None = None) -> NodeMeaning | None:
    """The real model's words for a node of its graph (None for any other graph, or a node it does not know)."""
    if MARKERS.isdisjoint(snapshot.module_template_ids):
        return None
    if (words := smollm_meaning(node, words_for(model_facts(snapshot)))) is None:
        return None
    name, formula, summary = words
    return NodeMeaning(name, head_formula(node.metadata.module_template_id, formula, conventions), summary)
