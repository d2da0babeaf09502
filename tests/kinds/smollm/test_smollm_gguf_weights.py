"""The GGUF loader on a tiny file written here the way llama.cpp writes SmolLM2's (smollm2_tiny_gguf.py):
config from the metadata, names mapped, Q/K un-permuted exactly, logits equal to the original module's,
and the safetensors cache (written once, read after, checked against the source's sha256)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import dequantize, quantize
from safetensors import safe_open
from smollm_tiny_gguf import write_tiny_gguf

from app.engine.lm.gguf_file import (
    cache_path,
    config_from_gguf,
    file_sha256,
    load_checkpoint,
    permute_rows,
    state_dict_from_gguf,
    unpermute_rows,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    model, state = write_tiny_gguf(path)
    return path, model, state


def test_the_config_comes_from_the_metadata(tiny):
    path, model, _ = tiny
    cfg = config_from_gguf(GGUFReader(path))
    # GGUF keeps the RMSNorm epsilon as float32
    assert cfg == dataclasses.replace(model.cfg, rms_eps=float(np.float32(model.cfg.rms_eps)))
    assert cfg.tie_embeddings  # no output.weight in the file


def test_the_loader_restores_the_original_weights_exactly(tiny):
    path, _, state = tiny
    loaded = state_dict_from_gguf(GGUFReader(path))
    assert set(loaded) == set(state)
    for name, tensor in state.items():
        assert loaded[name].dtype == torch.float32
        assert torch.equal(loaded[name], tensor), name


def test_the_file_really_holds_permuted_q_and_k(tiny):
    path, _, state = tiny
    raw = {t.name: np.asarray(t.data) for t in GGUFReader(path).tensors}
    assert not np.array_equal(raw["blk.0.attn_q.weight"], state["blocks.0.attention.q.weight"].numpy())
    assert not np.array_equal(raw["blk.0.attn_k.weight"], state["blocks.0.attention.k.weight"].numpy())
    assert np.array_equal(raw["blk.0.attn_v.weight"], state["blocks.0.attention.v.weight"].numpy())


def test_unpermute_inverts_llama_cpps_permute():
    weight = torch.randn(9 * 64, 576, generator=torch.Generator().manual_seed(0))
    for heads in (9, 3):
        assert torch.equal(unpermute_rows(permute_rows(weight, heads), heads), weight)
        assert not torch.equal(permute_rows(weight, heads), weight)


def test_the_loaded_module_gives_the_original_logits(tiny, tmp_path):
    path, model, _ = tiny
    loaded, _ = load_checkpoint(path, tmp_path)
    ids = torch.randint(3, 300, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        # rms_eps differs in the 8th digit (float32 in the file): logits to float32 rounding, not bitwise
        assert torch.allclose(loaded(ids), model(ids), atol=1e-5, rtol=0)
    assert loaded.lm_head.weight is loaded.embed.weight


def test_the_first_load_converts_and_later_loads_read_the_cache(tiny, tmp_path):
    path, _, _ = tiny
    first, meta = load_checkpoint(path, tmp_path)
    assert meta["converted"] and meta["source_sha256"] == file_sha256(path)
    cached = cache_path(tmp_path, meta["source_sha256"])
    assert cached.name == f"gguf-{meta['source_sha256'][:16]}.safetensors"
    with safe_open(str(cached), framework="pt") as handle:
        recorded = handle.metadata()
    assert recorded["source_sha256"] == meta["source_sha256"]
    assert json.loads(recorded["config"])["n_layer"] == 2
    second, meta_2 = load_checkpoint(path, tmp_path)
    assert not meta_2["converted"]
    for name, tensor in first.state_dict().items():
        assert torch.equal(second.state_dict()[name], tensor)


def test_a_cache_file_from_another_source_is_not_trusted(tiny, tmp_path):
    path, _, _ = tiny
    _, meta = load_checkpoint(path, tmp_path)
    cached = cache_path(tmp_path, meta["source_sha256"])
    # the same name, another source's hash inside: converted again, and rewritten
    with safe_open(str(cached), framework="pt") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        recorded = dict(handle.metadata())
    from safetensors.torch import save_file
    save_file(tensors, str(cached), metadata={**recorded, "source_sha256": "0" * 64})
    _, meta_2 = load_checkpoint(path, tmp_path)
    assert meta_2["converted"]
    with safe_open(str(cached), framework="pt") as handle:
        assert handle.metadata()["source_sha256"] == meta["source_sha256"]
    cached.write_bytes(b"torn")
    assert load_checkpoint(path, tmp_path)[1]["converted"]


def test_quantized_tensors_are_dequantized(tmp_path):
    """A Q8_0 tensor (SmolLM2's embedding) comes back as gguf's own dequantization, shaped [rows, cols]."""
    values = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    packed = quantize(values, GGMLQuantizationType.Q8_0)
    path = tmp_path / "q.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", packed, raw_shape=packed.shape, raw_dtype=GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tensor = GGUFReader(path).tensors[0]
    got = dequantize(tensor.data, tensor.tensor_type)
    assert got.shape == (8, 64)
    assert np.abs(got - values).max() < 0.02  # Q8_0: 8 bits a weight, one scale per 32


def test_an_unknown_tensor_is_an_error(tmp_path):
    path = tmp_path / "odd.gguf"
    writer = GGUFWriter(str(path), "llama")
    for key, value in (("embedding_length", 8), ("block_count", 0), ("feed_forward_length", 8),
                       ("context_length", 8)):
        getattr(writer, f"add_{key}")(value)
    writer.add_head_count(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(4)
    writer.add_tensor("blk.0.ffn_gate_inp.weight", np.ones(2, dtype=np.float32))  # a mixture-of-experts router
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="unexpected tensor"):
        state_dict_from_gguf(GGUFReader(path))
