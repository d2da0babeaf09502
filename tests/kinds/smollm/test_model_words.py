"""The real-model page's words are its own model's (views/model_facts.py): the shipped export reads as SmolLM2
(its policy node states nothing: the layers' widths and SmolLM2's head width), an export whose policy node states
another decoder's sizes gets those numbers in every node's words, the story, the model line and the run's
findings, a Qwen3-shaped one names its per-head q/k norms, and the count of parameters is the decoder's own."""
from __future__ import annotations

import copy
import json
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
import torch

from app.domain.snapshot import Snapshot, parse_snapshot
from app.engine.lm.decoder import Decoder, DecoderConfig
from app.kinds.smollm.engine.model_config import SMOLLM2_135M
from app.kinds.smollm.engine.params import default_attention_block
from app.kinds.smollm.engine.run_params import SmolRunParams
from app.kinds.smollm.engine.run_records import RunAnswer, RunPoint, SmolRunResult
from app.kinds.smollm.views.meaning import describe_smollm
from app.kinds.smollm.views.model_facts import SMOLLM2, UNNAMED, ModelFacts, model_facts, model_name
from app.kinds.smollm.views.run_panel import findings
from app.kinds.smollm.views.screen import model_label
from app.kinds.smollm.views.story import STORIES, stories_for

SHIPPED = Path(__file__).resolve().parents[3] / "walkthroughs" / "smollm_grpo.tensorviz.json"
ATTENTION = "policy.blocks.0.attention"
# a Qwen2-shaped decoder, nothing like SmolLM2: every size below differs from SmolLM2's
QWEN2_LIKE = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_kv_head": 2, "head_dim": 16, "ffn_dim": 128,
              "vocab_size": 300, "tie_embeddings": False, "qkv_bias": True, "qk_norm": False, "rope_theta": 1e6,
              "context_length": 256}
SMOLLM2_WORDS = ("576", "1,536", "49,152", "√64", "i + 32", "9 query heads", "SmolLM2", "135M", "30 ")


@cache
def _shipped() -> dict:
    return json.loads(SHIPPED.read_text())


def _nodes(doc: dict) -> dict[str, dict]:
    return {n["node_id"]: n for n in doc["document"]["semantic"]["nodes"]}


def _export(stated: dict | None = None, title: str | None = None, qk_norm_nodes: bool = False) -> Snapshot:
    """The shipped export with the scorers' group nodes stating `stated` ({}: nothing, as exports made before
    they did), another title, and (Qwen3's shape) a q and a k norm module in each copy's block 0 attention."""
    doc = copy.deepcopy(_shipped())
    nodes = _nodes(doc)
    if stated is not None:
        for scorer in ("policy", "old_policy", "reference_policy"):
            nodes[scorer]["params"] = dict(stated)
    if title is not None:
        doc["collaboration"]["walkthrough"]["title"] = title
    if qk_norm_nodes:
        for copy_id in ("policy", "old_policy", "reference_policy"):
            attention = nodes[f"{copy_id}.blocks.0.attention"]
            for part in ("q_norm", "k_norm"):
                node = copy.deepcopy(nodes[f"{copy_id}.blocks.0.norm_1"])
                node_id = f"{copy_id}.blocks.0.attention.{part}"
                node["node_id"] = node["metadata"]["moduleInstanceId"] = node_id
                node["metadata"].update(parentId=attention["node_id"], moduleMembers=[], moduleLayerCount=0)
                doc["document"]["semantic"]["nodes"].append(node)
                attention["metadata"]["moduleMembers"].append(node_id)
    return parse_snapshot(doc, source="edited smollm export")


def _words(snapshot: Snapshot, node_id: str) -> tuple[str, str | None, str]:
    meaning = describe_smollm(snapshot, snapshot.node(node_id))
    assert meaning is not None, node_id
    return meaning.display_name, meaning.formula, meaning.summary


def _run(steps: int) -> SmolRunResult:
    points = tuple(RunPoint(step=s, task_name="a", reward_mean=0.5, part_means={}, tied=False, length_mean=10.0,
                            stopped_share=1.0, kl_mean=0.0, clip_share=0.0, loss=0.0, grad_norm=1.0, seconds=1.0,
                            answers=(RunAnswer("x", 0.5, 0.0, 10, True),)) for s in range(steps))
    return SmolRunResult(SmolRunParams(steps=steps), "cpu", ("a",), points, seconds=1.0, load_seconds=0.0)


def _counted(cfg: DecoderConfig) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in Decoder(cfg).parameters())  # a tied matrix once, as graph_params counts


@pytest.mark.parametrize("stated", [None, {}], ids=["as-shipped", "stating-nothing"])
def test_the_shipped_export_reads_as_smollm2(stated):
    snapshot = _export(stated)
    assert model_facts(snapshot) == SMOLLM2
    assert model_facts(snapshot) is model_facts(snapshot)  # kept per snapshot
    cfg = SMOLLM2_135M
    assert (SMOLLM2.n_layer, SMOLLM2.n_embd, SMOLLM2.n_head, SMOLLM2.n_kv_head, SMOLLM2.head_dim, SMOLLM2.ffn_dim,
            SMOLLM2.vocab_size, SMOLLM2.tie_embeddings, SMOLLM2.qkv_bias, SMOLLM2.qk_norm) == (
        cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.ffn_dim, cfg.vocab_size,
        cfg.tie_embeddings, cfg.qkv_bias, cfg.qk_norm)
    assert SMOLLM2.parameters == _counted(cfg) == 134_515_008
    assert (SMOLLM2.name, SMOLLM2.short_name, SMOLLM2.size_label, SMOLLM2.attention_block) == (
        "SmolLM2-135M-Instruct", "SmolLM2-135M", "135M", 12)
    assert model_label(SMOLLM2, packaged=True) == "SmolLM2-135M-Instruct, 4-bit weights (Q4_1) expanded to float32"
    assert STORIES == stories_for(SMOLLM2)
    assert "all 30 blocks" in STORIES["blocks"].point and "each of the 9 attention heads" in STORIES["attention"].point


@pytest.mark.parametrize("cfg", [
    DecoderConfig(vocab_size=300, n_layer=2, n_embd=64, n_head=4, n_kv_head=2, ffn_dim=128, rope_theta=1e4,
                  rms_eps=1e-6, context_length=64, tie_embeddings=False, qkv_bias=True),
    DecoderConfig(vocab_size=300, n_layer=3, n_embd=64, n_head=4, n_kv_head=1, ffn_dim=96, rope_theta=1e4,
                  rms_eps=1e-6, context_length=64, head_dim_override=32, qk_norm=True),
], ids=["qwen2-untied", "qwen3-tied"])
def test_the_count_from_the_shapes_is_the_decoders(cfg):
    facts = ModelFacts("m", cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.ffn_dim,
                       cfg.vocab_size, cfg.tie_embeddings, cfg.qkv_bias, cfg.qk_norm)
    assert facts.counted_parameters() == _counted(cfg)


@pytest.mark.parametrize("n_layer", [1, 2, 3, 24, 30, 36])
def test_the_default_attention_block_is_the_steps(n_layer):
    assert replace(SMOLLM2, n_layer=n_layer).attention_block == default_attention_block(n_layer)


def test_an_export_stating_another_decoder_has_its_sizes_everywhere():
    snapshot = _export({**QWEN2_LIKE, "parameters": 81_234}, title="GRPO on a real pretrained model: Tiny-Qwen-Instruct")
    facts = model_facts(snapshot)
    assert facts == ModelFacts("Tiny-Qwen-Instruct", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, head_dim=16,
                               ffn_dim=128, vocab_size=300, tie_embeddings=False, qkv_bias=True, qk_norm=False,
                               parameters=81_234)
    assert (facts.size_label, facts.attention_block, facts.family) == ("81K", 1, "Qwen2")
    assert _words(snapshot, f"{ATTENTION}.q") == ("Queries", "q = W_q x + b_q",
                                                   "64 → 4 heads × 16 numbers per position, plus a learned bias.")
    assert _words(snapshot, f"{ATTENTION}.k")[2] == \
        "64 → 2 heads × 16 numbers per position (shared by 2 query heads each), plus a learned bias."
    assert _words(snapshot, "policy.lm_head")[1:] == (
        "z_t = W_head x_t", "One score per vocabulary token (300): the logits; its weights are its own, not the "
                            "embedding's.")
    assert _words(snapshot, "policy.embed")[2] == "Looks up 64 numbers for each of 300 token ids."
    assert _words(snapshot, "policy.blocks.0.mlp")[2] == \
        "Widens each position to 128 numbers twice, gates one by the other, narrows back to 64."
    assert _words(snapshot, "matmul@policy.blocks.0.attention#0")[1] == "s = q·kᵀ / √16"
    assert _words(snapshot, "policy.blocks.0.attention.rope")[1] == "rotate pairs (i, i + 8) of q and k by angle t·θ_i"
    name, _, sentence = _words(snapshot, "old_policy")
    assert name == "Old policy (Tiny-Qwen)"
    assert sentence.startswith("Tiny-Qwen-Instruct: the token embedding, 2 Qwen2 blocks, a final RMSNorm and the "
                               "LM head (its own weights)")
    assert "q, k and v each add a learned bias" in _words(snapshot, ATTENTION)[2]
    said = [" ".join(w or "" for w in _words(snapshot, n.node_id)) for n in snapshot.nodes]
    assert [w for w in SMOLLM2_WORDS if any(w in s for s in said)] == []

    stories = stories_for(facts)
    assert "Tiny-Qwen-Instruct" in stories["sample"].point
    assert "reaches both blocks" in stories["blocks"].point and "not tied" in stories["blocks"].more
    assert "each of the 4 attention heads" in stories["attention"].point
    told = " ".join(f"{s.point} {s.more}" for s in stories.values())
    assert [w for w in SMOLLM2_WORDS if w in told] == []
    assert model_label(facts, packaged=False) == "Tiny-Qwen-Instruct, its GGUF weights expanded to float32"
    assert "12 steps of a 81K model are not that" in findings(_run(12), facts)[1]


def test_a_qwen3_shaped_export_names_its_per_head_q_and_k_norms():
    stated = {**QWEN2_LIKE, "qkv_bias": False, "qk_norm": True, "tie_embeddings": True}
    snapshot = _export(stated, qk_norm_nodes=True)
    assert _words(snapshot, f"{ATTENTION}.q_norm") == (
        "Query norm (per head)", "q_h ← q_h / √(mean(q_h²) + ε) ⊙ g",
        "Rescales each query head's 16 numbers to unit root-mean-square, then by learned gains every head shares; "
        "before RoPE, so the scores stay in range.")
    assert _words(snapshot, "old_policy.blocks.0.attention.k_norm")[0] == "Key norm (per head) of π_old"
    name, formula, sentence = _words(snapshot, ATTENTION)
    assert formula == "softmax(RoPE(RMSNorm(q))·RoPE(RMSNorm(k))ᵀ/√16, causal)·v"
    assert "Each head's q and k are RMS-normed over their 16 numbers before RoPE." in sentence
    assert "bias" not in sentence and "Qwen3 blocks" in _words(snapshot, "policy")[2]
    assert _words(snapshot, "policy.blocks.0.norm_1")[0] == "RMSNorm"  # the block's own norms keep their words


def test_an_old_export_reads_its_layers_and_the_rest_is_smollm2s():
    """No stated sizes: the widths and the block count from the layers, a head's width from SmolLM2, and the q/k
    norms and biases from what the graph holds."""
    doc = copy.deepcopy(_shipped())
    nodes = _nodes(doc)
    for scorer in ("policy", "old_policy", "reference_policy"):
        nodes[scorer]["params"] = {}
    nodes["policy.embed"]["params"].update(num_embeddings=1000, embedding_dim=128)
    nodes["policy.blocks.0.mlp.gate"]["params"]["out_features"] = 512
    nodes[f"{ATTENTION}.q"]["params"].update(out_features=256, bias=True)  # 4 heads of SmolLM2's 64
    nodes[f"{ATTENTION}.k"]["params"]["out_features"] = 128
    facts = model_facts(parse_snapshot(doc, source="old export"))
    assert (facts.n_layer, facts.n_embd, facts.vocab_size, facts.ffn_dim, facts.n_head, facts.n_kv_head,
            facts.head_dim, facts.qkv_bias, facts.qk_norm, facts.tie_embeddings) == (
        30, 128, 1000, 512, 4, 2, 64, True, False, True)
    assert facts.parameters == facts.counted_parameters()
    assert model_facts(_export({}, qk_norm_nodes=True)).qk_norm


def test_the_name_is_the_titles_after_its_colon():
    assert model_name(_export(title="GRPO on a real pretrained model: Qwen3-0.6B")) == "Qwen3-0.6B"
    snapshot = _export(title="An upload without a model's name")
    assert model_name(snapshot) == UNNAMED and not model_facts(snapshot).named
    assert stories_for(model_facts(snapshot))["sample"].point.startswith("A real chat model answers")
    assert _words(snapshot, "policy")[2].startswith("The model: the token embedding")


def test_the_page_says_the_walkthroughs_sizes(client):
    page = client.get("/walkthroughs/smollm_grpo/steps/attention")
    assert page.status_code == 200, page.text[:300]
    assert "each of the 9 attention heads" in page.text
    assert "whose attention weights are kept (0 to 29; blank: block 12, 40 % of the way up)" in page.text
