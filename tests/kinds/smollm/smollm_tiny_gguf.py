"""A tiny GGUF file written the way llama.cpp's converter writes SmolLM2's, for tests that must not need
the real 98 MB checkpoint: `Decoder.small`'s random weights (F32, so the round trip can be exact) under
llama.cpp's tensor names, Q and K rows permuted as convert_hf_to_gguf.py's `LlamaModel.permute` does,
the llama.* metadata, and a byte-level BPE vocabulary of 300 tokens (3 control tokens, GPT-2's 256
byte characters, 41 merges) with SmolLM2's pre-tokenizer name and its ChatML chat template."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGUFWriter
from tokenizers import pre_tokenizers

from app.engine.lm.decoder import Decoder

SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# pieces the merges build, left to right ("Ġthe": "Ġ t", "Ġt h", "Ġth e"), until 41 merges
WORDS = ["Ġthe", "Ġand", "ing", "Ġhello", "Ġworld", "er", "Ġis", "12", "Ġof", "Ġto", "Ġa", "Ċ", "user", "system",
         "Ġassistant", "Ġyou", "Ġcan", "Ġhelp"]


def _merges() -> list[tuple[str, str]]:
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        for end in range(2, len(word) + 1):
            pair = (word[: end - 1], word[end - 1])
            if pair not in merges:
                merges.append(pair)
            if len(merges) == 41:
                return merges
    raise AssertionError("the words give fewer than 41 merges")


def vocabulary() -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges as llama.cpp stores them: "a b", token types: 3 control, 1 normal)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = _merges()
    tokens = CONTROL + alphabet + [left + right for left, right in merges]
    assert len(tokens) == len(set(tokens)) == 300
    types = [3] * len(CONTROL) + [1] * (len(tokens) - len(CONTROL))
    return tokens, [f"{left} {right}" for left, right in merges], types


def llama_cpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute (n_head = the query heads for Q, the KV heads for K)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


GGUF_NAMES = {"norm_1.weight": "attn_norm.weight", "attention.q.weight": "attn_q.weight",
              "attention.k.weight": "attn_k.weight", "attention.v.weight": "attn_v.weight",
              "attention.o.weight": "attn_output.weight", "norm_2.weight": "ffn_norm.weight",
              "mlp.gate.weight": "ffn_gate.weight", "mlp.up.weight": "ffn_up.weight", "mlp.down.weight": "ffn_down.weight"}


def write_tiny_gguf(path: Path, seed: int = 0, n_layer: int = 2) -> tuple[Decoder, dict[str, torch.Tensor]]:
    """Writes the file; returns the model it holds and its original (un-permuted) state dict."""
    model = Decoder.small(seed, n_layer).eval()
    cfg = model.cfg
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items() if name != "lm_head.weight"}
    writer = GGUFWriter(str(path), "llama")
    writer.add_name("tiny smollm2 test model")
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_context_length(cfg.context_length)
    writer.add_embedding_length(cfg.n_embd)
    writer.add_block_count(cfg.n_layer)
    writer.add_feed_forward_length(cfg.ffn_dim)
    writer.add_head_count(cfg.n_head)
    writer.add_head_count_kv(cfg.n_kv_head)
    writer.add_rope_freq_base(cfg.rope_theta)
    writer.add_layer_norm_rms_eps(cfg.rms_eps)
    writer.add_rope_dimension_count(cfg.head_dim)
    tokens, merges, types = vocabulary()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(SMOLLM2_CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", state["embed.weight"].numpy())
    for layer in range(cfg.n_layer):
        for ours, theirs in GGUF_NAMES.items():
            weights = state[f"blocks.{layer}.{ours}"].numpy()
            if ours == "attention.q.weight":
                weights = llama_cpp_permute(weights, cfg.n_head)
            elif ours == "attention.k.weight":
                weights = llama_cpp_permute(weights, cfg.n_kv_head)
            writer.add_tensor(f"blk.{layer}.{theirs}", np.ascontiguousarray(weights))
    writer.add_tensor("output_norm.weight", state["norm.weight"].numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model, state
