"""A language model's config and weights, read from its GGUF file (ggml's `gguf` reader), as our decoder's.

Three architectures (`general.architecture`), each read under its own metadata prefix (`llama.*`,
`qwen2.*`, `qwen3.*`), as transformers' GGUF loader (GGUF_CONFIG_MAPPING, integrations/ggml.py) and
llama.cpp (src/llama-model.cpp) read them:
- llama: Llama 2/3.x, TinyLlama and their like; tied or untied embeddings (no `output.weight`: tied);
- qwen2: Llama's blocks plus biases on q, k and v (`attn_q.bias`, ...);
- qwen3: Llama's blocks plus an RMSNorm over each head of q and k (`attn_q_norm.weight`, [D]), and a head
  width of its own (`qwen3.attention.key_length`: 128 where C / H is 64).

GGUF stores each tensor as llama.cpp names it (`token_embd.weight`, `blk.3.attn_q.weight`, ...), most of
them quantized (a Q4_1 file: Q4_1 matrices, a Q8_0 embedding, F32 norms). `state_dict_from_gguf`
dequantizes every one to float32 with `gguf.quants.dequantize` and renames it to our module's name.

The one change of values: llama.cpp's converter (convert_hf_to_gguf.py, `LlamaModel.permute`) reorders
the rows of `attn_q` and `attn_k` within each head, for its interleaved RoPE (channel pairs (2i, 2i+1));
our RoPE pairs (i, i + D/2), as HF's does. `unpermute_rows` undoes it exactly as transformers' GGUF
loader does (`LlamaTensorProcessor._reverse_permute_weights`, modeling_gguf_pytorch_utils.py): rows
viewed as [heads, D/2, 2, C], the two middle axes swapped back. It only moves rows, so the round trip
is exact (a test holds it). Only llama files are permuted: the converter's Qwen2Model and Qwen3Model
are no LlamaModel and write HF's rows as they are (llama.cpp runs them with NEOX RoPE, our pairing), and
transformers un-permutes the llama architecture alone (TENSOR_PROCESSORS).

RoPE scaling. Llama 3.1/3.2's "llama3" scaling has no metadata in a GGUF file: convert_hf_to_gguf.py
(`LlamaModel.generate_extra_tensors`) writes the per-pair divisors it implies as a tensor,
`rope_freqs.weight` [D/2], which llama.cpp divides each frequency by (ggml_rope_ext's freq_factors).
A linear scaling is metadata (`llama.rope.scaling.type = linear`, `.factor`), every frequency divided by
the factor. Both become `DecoderConfig.rope_freq_factors`; any other scaling type (yarn, ...) is refused.
transformers 5.10.4's GGUF loader reads neither: it maps no `rope.scaling.*` key of these architectures
(only gpt-oss's) and drops `rope_freqs.weight` (no parameter of LlamaForCausalLM takes it), so its model
of a Llama 3.1 file runs unscaled RoPE. Here the file's factors are applied, as llama.cpp and the
original checkpoint (rope_type "llama3", transformers' `_compute_llama3_parameters`) apply them; the peer
test (peers/test_lm_families_peer.py) holds our logits to transformers' Llama given the scaling.

`load_checkpoint` converts once and keeps the float32 weights as a safetensors file named by the GGUF
file's sha256, whose metadata records the full hash and the config; a later load reads that file.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGUFReader, ReaderTensor
from gguf.quants import dequantize
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from app.engine.lm.decoder import Decoder, DecoderConfig

CACHE_PREFIX = "gguf"  # converted files: gguf-<sha256[:16]>.safetensors and .text.json
CACHE_FORMAT = "1"  # bump when the conversion changes, so old cache files are not read

SUPPORTED_ARCHITECTURES = ("llama", "qwen2", "qwen3")
# whose converter permutes Q/K rows for llama.cpp's interleaved RoPE (module docstring)
_PERMUTED_QK = {"llama"}
ROPE_FREQS = "rope_freqs.weight"  # Llama 3's RoPE scaling: config, not a weight
ROPE_SCALING_TYPES = ("none", "linear")  # {arch}.rope.scaling.type values read here

# llama.cpp's name inside block N -> ours inside blocks.N
_BLOCK_NAMES = {
    "attn_norm.weight": "norm_1.weight",
    "attn_q.weight": "attention.q.weight",
    "attn_k.weight": "attention.k.weight",
    "attn_v.weight": "attention.v.weight",
    "attn_q.bias": "attention.q.bias",  # qwen2
    "attn_k.bias": "attention.k.bias",
    "attn_v.bias": "attention.v.bias",
    "attn_q_norm.weight": "attention.q_norm.weight",  # qwen3
    "attn_k_norm.weight": "attention.k_norm.weight",
    "attn_output.weight": "attention.o.weight",
    "ffn_norm.weight": "norm_2.weight",
    "ffn_gate.weight": "mlp.gate.weight",
    "ffn_up.weight": "mlp.up.weight",
    "ffn_down.weight": "mlp.down.weight",
}
_TOP_NAMES = {"token_embd.weight": "embed.weight", "output_norm.weight": "norm.weight",
              "output.weight": "lm_head.weight"}
_BLOCK_PATTERN = re.compile(r"blk\.(\d+)\.(.+)")


def field_value(reader: GGUFReader, key: str, default: Any = None) -> Any:
    """One metadata value (a number, a string, a bool or a list of them), or `default` when absent."""
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def architecture_of(reader: GGUFReader) -> str:
    """The file's `general.architecture`, if this stack reads it; else a ValueError naming it and ours."""
    architecture = field_value(reader, "general.architecture")
    if architecture not in SUPPORTED_ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r} is not supported "
                         f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    return str(architecture)


def _tensor_values(tensor: ReaderTensor) -> np.ndarray:
    """One tensor dequantized to float32, shaped as numpy and torch shape it ([out, in] for a matrix)."""
    values = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    # GGUF's shape lists the fastest axis first; numpy's (and torch's [out, in]) is the reverse
    return values.reshape([int(n) for n in reversed(tensor.shape.tolist())])


def rope_freq_factors(reader: GGUFReader, architecture: str, head_dim: int) -> tuple[float, ...] | None:
    """Each channel pair's frequency divisor [D/2] (module docstring: RoPE scaling), None when unscaled."""
    scaling = field_value(reader, f"{architecture}.rope.scaling.type", "none")
    if scaling not in ROPE_SCALING_TYPES:
        raise ValueError(f"RoPE scaling {scaling!r} ({architecture}.rope.scaling.type) is not implemented "
                         f"(implemented: {', '.join(ROPE_SCALING_TYPES)}, and Llama 3's {ROPE_FREQS})")
    tensor = next((t for t in reader.tensors if t.name == ROPE_FREQS), None)
    factors = None if tensor is None else [float(f) for f in _tensor_values(tensor).reshape(-1)]
    if scaling == "linear":
        factor = float(field_value(reader, f"{architecture}.rope.scaling.factor"))
        factors = [f * factor for f in (factors or [1.0] * (head_dim // 2))]
    return None if factors is None else tuple(factors)


def config_from_gguf(reader: GGUFReader) -> DecoderConfig:
    """Our config from the file's `<architecture>.*` metadata, and its tensors: no `output.weight` means tied
    embeddings, `attn_q.bias` q/k/v biases, `attn_q_norm.weight` per-head q/k norms, `rope_freqs.weight`
    Llama 3's RoPE scaling."""
    architecture = architecture_of(reader)

    def key(name: str, default: Any = None) -> Any:
        return field_value(reader, f"{architecture}.{name}", default)

    tokens = field_value(reader, "tokenizer.ggml.tokens", [])
    names = {t.name for t in reader.tensors}
    n_embd = int(key("embedding_length"))
    n_head = int(key("attention.head_count"))
    # a head's width: attention.key_length where the converter wrote it (Qwen3; llama.cpp's n_embd_head_k),
    # else C / H (which DecoderConfig holds to divide)
    key_length = key("attention.key_length")
    head_dim = n_embd // n_head if key_length is None else int(key_length)
    value_dim = int(key("attention.value_length", head_dim))
    if value_dim != head_dim:
        raise ValueError(f"values {value_dim} wide and keys {head_dim} wide ({architecture}.attention.value_length"
                         f" and .key_length) are not implemented")
    rope_dims = int(key("rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise ValueError(f"partial RoPE ({rope_dims} of {head_dim} channels) is not implemented")
    return DecoderConfig(
        vocab_size=int(key("vocab_size", len(tokens))),
        n_layer=int(key("block_count")),
        n_embd=n_embd,
        n_head=n_head,
        n_kv_head=int(key("attention.head_count_kv", n_head)),
        ffn_dim=int(key("feed_forward_length")),
        rope_theta=float(key("rope.freq_base", 10000.0)),
        rms_eps=float(key("attention.layer_norm_rms_epsilon")),
        context_length=int(key("context_length")),
        tie_embeddings="output.weight" not in names,
        head_dim_override=None if key_length is None or head_dim * n_head == n_embd else head_dim,
        qkv_bias="blk.0.attn_q.bias" in names,
        qk_norm="blk.0.attn_q_norm.weight" in names,
        rope_freq_factors=rope_freq_factors(reader, architecture, head_dim),
    )


def permute_rows(weight: torch.Tensor, n_head: int) -> torch.Tensor:
    """llama.cpp's converter's reorder of Q/K rows (the inverse of `unpermute_rows`), for tests."""
    # weight: [n_head·D, C]; viewed [n_head, 2, D/2, C], axes 1 and 2 swapped
    rows = weight.shape[0]
    return weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def unpermute_rows(weight: torch.Tensor, n_head: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row reorder: transformers' reverse_permute (n_head = H for Q, K for K)."""
    # weight: [n_head·D, C]; viewed [n_head, D/2, 2, C], axes 2 and 1 swapped back
    rows = weight.shape[0]
    return weight.reshape(n_head, rows // n_head // 2, 2, *weight.shape[1:]).swapaxes(2, 1).reshape(weight.shape)


def our_name(gguf_name: str) -> str:
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name]
    match = _BLOCK_PATTERN.fullmatch(gguf_name)
    if match and match.group(2) in _BLOCK_NAMES:
        return f"blocks.{match.group(1)}.{_BLOCK_NAMES[match.group(2)]}"
    raise ValueError(f"unexpected tensor in the GGUF file: {gguf_name}")


def state_dict_from_gguf(reader: GGUFReader) -> dict[str, torch.Tensor]:
    """Every weight, dequantized to float32 and named as our decoder's; a llama file's Q and K un-permuted.
    A tied file has no `lm_head.weight` (the model shares `embed.weight`); `rope_freqs.weight` is config
    (config_from_gguf), not a weight."""
    cfg = config_from_gguf(reader)
    permuted = architecture_of(reader) in _PERMUTED_QK
    state: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        if tensor.name == ROPE_FREQS:
            continue
        weight = torch.from_numpy(_tensor_values(tensor).copy())
        name = our_name(tensor.name)
        if permuted and name.endswith("attention.q.weight"):
            weight = unpermute_rows(weight, cfg.n_head)
        elif permuted and name.endswith("attention.k.weight"):
            weight = unpermute_rows(weight, cfg.n_kv_head)
        state[name] = weight.contiguous()
    return state


def model_from_state_dict(cfg: DecoderConfig, state: dict[str, torch.Tensor]) -> Decoder:
    """A Llama holding exactly these weights: every parameter named, nothing left over."""
    model = Decoder(cfg)  # (built on the meta device instead, the first use imports ~2 s of torch: not worth it)
    expected = set(model.state_dict())
    if cfg.tie_embeddings:
        expected.discard("lm_head.weight")  # the same tensor as embed.weight
    if set(state) != expected:
        raise ValueError(f"weights do not match the model: missing {sorted(expected - set(state))[:5]}, "
                         f"unexpected {sorted(set(state) - expected)[:5]}")
    model.load_state_dict(state, strict=False)  # copies into the tied embedding / head once
    model.eval()
    return model


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def cache_path(cache_dir: Path, source_sha256: str) -> Path:
    return Path(cache_dir) / f"{CACHE_PREFIX}-{source_sha256[:16]}.safetensors"


def _read_cache(path: Path, source_sha256: str) -> tuple[DecoderConfig, dict[str, torch.Tensor]] | None:
    """The cached weights, if the file is there and was converted from this very GGUF file."""
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            if metadata.get("source_sha256") != source_sha256 or metadata.get("format") != CACHE_FORMAT:
                return None
            cfg = DecoderConfig(**json.loads(metadata["config"]))
            state = {name: handle.get_tensor(name) for name in handle.keys()}
    except (OSError, ValueError, KeyError, TypeError, SafetensorError):
        return None  # a torn or foreign file: convert again
    return cfg, state


def _write_cache(path: Path, cfg: DecoderConfig, state: dict[str, torch.Tensor], source_sha256: str) -> None:
    """Written beside, then renamed: a reader (another worker) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"source_sha256": source_sha256, "format": CACHE_FORMAT, "config": json.dumps(asdict(cfg))}
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        save_file(state, temporary, metadata=metadata)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def load_checkpoint(gguf_path: Path, cache_dir: Path,
                    reader: GGUFReader | None = None) -> tuple[Decoder, dict[str, Any]]:
    """The model in the GGUF file, from the converted cache when it holds this file's weights.

    meta: source_sha256 (of the GGUF file), cache_path, converted (True when this call converted and
    wrote the cache), seconds (this call's time, hashing included)."""
    started = time.perf_counter()
    gguf_path, cache_dir = Path(gguf_path), Path(cache_dir)
    source_sha256 = file_sha256(gguf_path)
    path = cache_path(cache_dir, source_sha256)
    cached = _read_cache(path, source_sha256)
    converted = cached is None
    if cached is None:
        reader = reader if reader is not None else GGUFReader(gguf_path)
        cfg, state = config_from_gguf(reader), state_dict_from_gguf(reader)
        _write_cache(path, cfg, state, source_sha256)
    else:
        cfg, state = cached
    model = model_from_state_dict(cfg, state)
    meta = {"source_sha256": source_sha256, "cache_path": str(path), "converted": converted,
            "seconds": time.perf_counter() - started}
    return model, meta
