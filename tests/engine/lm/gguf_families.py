"""Tiny GGUF files of the Llama and Qwen families, written as llama.cpp's converter (convert_hf_to_gguf.py)
writes the real ones, with gguf's own GGUFWriter: random F32 weights under llama.cpp's tensor names, the
`<architecture>.*` metadata, a byte-level BPE vocabulary (GPT-2's 256 byte characters, merges, the
family's control tokens) with the family's pre-tokenizer name and a chat template of its shape.

- "llama": Llama 3's shape: untied (`output.weight`), Q/K rows permuted (LlamaModel.permute), pre-tokenizer
  "llama-bpe", BOS added, `<|begin_of_text|>` ... `<|eot_id|>`, Llama 3's chat template (it writes
  `bos_token`);
- "llama3_scaled": the same with Llama 3.1's RoPE scaling as the converter stores it, the
  `rope_freqs.weight` tensor its `generate_extra_tensors` computes from rope_type "llama3";
- "qwen2": tied, q/k/v biases (`attn_q.bias`, ...), rows as HF has them (Qwen2Model permutes nothing),
  pre-tokenizer "qwen2", ChatML;
- "qwen3": tied, per-head q/k RMSNorm weights (`attn_q_norm.weight`, [D]) and a head width of its own,
  `qwen3.attention.key_length` = 128 where C / H = 16 (128 is also transformers' Qwen3Config default, which
  its GGUF loader keeps: it reads no key_length for qwen3).

`write_family(path, family)` returns the weights under our decoder's names, in HF's row order (before
any permutation), so a test can hold the loader to them exactly. Imported by the quick tests
(tests/engine/lm) and, by path, by the peer test (peers/test_lm_families_peer.py).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, RopeScalingType
from tokenizers import pre_tokenizers

LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
CHATML_TEMPLATE = (
    "{%- for message in messages %}{%- if loop.first and message['role'] != 'system' %}"
    "{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
LLAMA3_CONTROL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
QWEN_CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# pieces the merges build, left to right ("Ġthe": "Ġ t", "Ġt h", "Ġth e"); digit runs, so a pre-tokenizer that
# keeps "12345" whole and one that cuts it in threes give different tokens
WORDS = ["Ġthe", "Ġand", "ing", "Ġhello", "Ġworld", "er", "Ġis", "Ġof", "Ġto", "Ċ", "ĊĊ", "user", "system",
         "assistant", "Ġyou", "'s", "'t", "Ġcan", "Ġhelp", "123", "45", "234", "Ġ1", "Ġ12", "ĠĠ", "ĠĠĠ"]
# in the vocabulary, built by no merge: Llama 3's ignore_merges makes the pre-token " quux" one token
UNREACHABLE = "Ġquux"
LLAMA3_ROPE_SCALING = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 512}


@dataclass(frozen=True)
class Family:
    architecture: str  # general.architecture, and the metadata's prefix
    pre: str  # tokenizer.ggml.pre
    control: tuple[str, ...]
    bos: str
    eos: str
    pad: str
    chat_template: str
    tied: bool
    permute_qk: bool = False  # llama: the converter's LlamaModel.permute
    qkv_bias: bool = False
    qk_norm: bool = False
    key_length: int | None = None  # written when a head's width is not C / H
    llama3_rope_scaling: bool = False
    add_bos: bool | None = None  # tokenizer.ggml.add_bos_token; None: not written
    rope_scaling_type: str | None = None  # <architecture>.rope.scaling.type ("yarn": a refusal's test)
    rope_scaling_factor: float | None = None  # <architecture>.rope.scaling.factor
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_kv_head: int = 2
    ffn_dim: int = 96
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    context_length: int = 1024

    @property
    def head_dim(self) -> int:
        return self.key_length if self.key_length is not None else self.n_embd // self.n_head


FAMILIES = {
    "llama": Family("llama", "llama-bpe", tuple(LLAMA3_CONTROL), "<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>",
                    LLAMA3_CHAT_TEMPLATE, tied=False, permute_qk=True, add_bos=True, rms_eps=1e-5),
    "qwen2": Family("qwen2", "qwen2", tuple(QWEN_CONTROL), "<|endoftext|>", "<|im_end|>", "<|endoftext|>",
                    CHATML_TEMPLATE, tied=True, qkv_bias=True, add_bos=False, rope_theta=1000000.0),
    "qwen3": Family("qwen3", "qwen2", tuple(QWEN_CONTROL), "<|endoftext|>", "<|im_end|>", "<|endoftext|>",
                    CHATML_TEMPLATE, tied=True, qk_norm=True, key_length=128, add_bos=False, rope_theta=1000000.0),
}
FAMILIES["llama3_scaled"] = dataclasses.replace(FAMILIES["llama"], llama3_rope_scaling=True)


def _merges() -> list[tuple[str, str]]:
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        for end in range(2, len(word) + 1):
            pair = (word[: end - 1], word[end - 1])
            if pair not in merges:
                merges.append(pair)
    return merges


def vocabulary(family: Family) -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges as llama.cpp stores them: "a b", token types: 1 normal, 3 control). The control
    tokens come last, as in the real files (Llama 3's from 128,000, Qwen's from 151,643)."""
    merges = _merges()
    tokens = sorted(pre_tokenizers.ByteLevel.alphabet()) + [left + right for left, right in merges]
    tokens += [UNREACHABLE] + list(family.control)
    assert len(tokens) == len(set(tokens))
    types = [1] * (len(tokens) - len(family.control)) + [3] * len(family.control)
    return tokens, [f"{left} {right}" for left, right in merges], types


def llama3_rope_factors(family: Family) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors for rope_type "llama3": [D/2] float32."""
    scaling = LLAMA3_ROPE_SCALING
    dim = family.head_dim
    freqs = 1.0 / (family.rope_theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old_context = scaling["original_max_position_embeddings"]
    low_wavelength = old_context / scaling["low_freq_factor"]
    high_wavelength = old_context / scaling["high_freq_factor"]
    factors = []
    for freq in freqs:
        wavelength = 2 * math.pi / freq
        if wavelength < high_wavelength:
            factors.append(1.0)
        elif wavelength > low_wavelength:
            factors.append(scaling["factor"])
        else:
            smooth = (old_context / wavelength - scaling["low_freq_factor"]) / (
                scaling["high_freq_factor"] - scaling["low_freq_factor"])
            factors.append(1 / ((1 - smooth) / scaling["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def llama_cpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute (n_head = the query heads for Q, the KV heads for K)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def random_weights(family: Family, vocab_size: int, seed: int) -> dict[str, np.ndarray]:
    """Our decoder's names -> float32 arrays in HF's layout ([out, in]); norms near 1, the rest small."""
    rng = np.random.default_rng(seed)
    c, d, f = family.n_embd, family.head_dim, family.ffn_dim

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (0.08 * rng.standard_normal((rows, cols))).astype(np.float32)

    def norm(width: int, spread: float = 0.1) -> np.ndarray:
        return (1.0 + spread * rng.standard_normal(width)).astype(np.float32)

    state = {"embed.weight": matrix(vocab_size, c)}
    for layer in range(family.n_layer):
        block = {
            "norm_1.weight": norm(c),
            "attention.q.weight": matrix(family.n_head * d, c),
            "attention.k.weight": matrix(family.n_kv_head * d, c),
            "attention.v.weight": matrix(family.n_kv_head * d, c),
            "attention.o.weight": matrix(c, family.n_head * d),
            "norm_2.weight": norm(c),
            "mlp.gate.weight": matrix(f, c),
            "mlp.up.weight": matrix(f, c),
            "mlp.down.weight": matrix(c, f),
        }
        if family.qkv_bias:
            for part, width in (("q", family.n_head * d), ("k", family.n_kv_head * d), ("v", family.n_kv_head * d)):
                block[f"attention.{part}.bias"] = (0.3 * rng.standard_normal(width)).astype(np.float32)
        if family.qk_norm:
            block["attention.q_norm.weight"] = norm(d, 0.3)
            block["attention.k_norm.weight"] = norm(d, 0.3)
        state.update({f"blocks.{layer}.{name}": value for name, value in block.items()})
    state["norm.weight"] = norm(c)
    if not family.tied:
        state["lm_head.weight"] = matrix(vocab_size, c)
    return state


GGUF_NAMES = {"norm_1.weight": "attn_norm.weight", "attention.q.weight": "attn_q.weight",
              "attention.k.weight": "attn_k.weight", "attention.v.weight": "attn_v.weight",
              "attention.q.bias": "attn_q.bias", "attention.k.bias": "attn_k.bias", "attention.v.bias": "attn_v.bias",
              "attention.q_norm.weight": "attn_q_norm.weight", "attention.k_norm.weight": "attn_k_norm.weight",
              "attention.o.weight": "attn_output.weight", "norm_2.weight": "ffn_norm.weight",
              "mlp.gate.weight": "ffn_gate.weight", "mlp.up.weight": "ffn_up.weight", "mlp.down.weight": "ffn_down.weight",
              "embed.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def gguf_name(ours: str) -> str:
    if ours.startswith("blocks."):
        _, layer, rest = ours.split(".", 2)
        return f"blk.{layer}.{GGUF_NAMES[rest]}"
    return GGUF_NAMES[ours]


def write_family(path: Path, family: Family | str, seed: int = 0,
                 int8_tensor: str | None = None) -> dict[str, np.ndarray]:
    """Writes the file; returns its weights under our names, in HF's row order. `int8_tensor` (a llama.cpp
    name) is stored as I8, a type gguf.quants.dequantize cannot read (for the refusal's test)."""
    family = FAMILIES[family] if isinstance(family, str) else family
    tokens, merges, types = vocabulary(family)
    state = random_weights(family, len(tokens), seed)
    arch = family.architecture
    writer = GGUFWriter(str(path), arch)
    writer.add_name(f"tiny {arch} test model")
    writer.add_vocab_size(len(tokens))
    writer.add_context_length(family.context_length)
    writer.add_embedding_length(family.n_embd)
    writer.add_block_count(family.n_layer)
    writer.add_feed_forward_length(family.ffn_dim)
    writer.add_head_count(family.n_head)
    writer.add_head_count_kv(family.n_kv_head)
    writer.add_rope_freq_base(family.rope_theta)
    writer.add_layer_norm_rms_eps(family.rms_eps)
    if family.key_length is not None:
        writer.add_key_length(family.key_length)
        writer.add_value_length(family.key_length)
    if arch == "llama":
        writer.add_rope_dimension_count(family.head_dim)
    if family.rope_scaling_type is not None:
        writer.add_rope_scaling_type(RopeScalingType(family.rope_scaling_type))
    if family.rope_scaling_factor is not None:
        writer.add_rope_scaling_factor(family.rope_scaling_factor)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(family.pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index(family.bos))
    writer.add_eos_token_id(tokens.index(family.eos))
    writer.add_pad_token_id(tokens.index(family.pad))
    if family.add_bos is not None:
        writer.add_add_bos_token(family.add_bos)
    writer.add_chat_template(family.chat_template)

    for ours, values in state.items():
        if family.permute_qk and ours.endswith("attention.q.weight"):
            values = llama_cpp_permute(values, family.n_head)
        elif family.permute_qk and ours.endswith("attention.k.weight"):
            values = llama_cpp_permute(values, family.n_kv_head)
        name = gguf_name(ours)
        if name == int8_tensor:
            values = np.clip(np.round(values * 100), -127, 127).astype(np.int8)
        writer.add_tensor(name, np.ascontiguousarray(values))
    if family.llama3_rope_scaling:
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(family))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return state
