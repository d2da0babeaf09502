"""Each family's GGUF file (gguf_families.py) read by the shared loader (app/engine/lm/gguf_file.py): the config
from the file's own `<architecture>.*` metadata and tensors, every weight back exactly under our names
(Q/K un-permuted for llama only), Llama 3's rope_freqs as the config's frequency factors, and the converted
cache giving the same config and model back."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from gguf import GGUFReader
from gguf_families import FAMILIES, llama3_rope_factors, write_family

from app.engine.lm.gguf_file import config_from_gguf, load_checkpoint, state_dict_from_gguf

NAMES = ["llama", "qwen2", "qwen3", "llama3_scaled"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    return {name: (folder / f"{name}.gguf", write_family(folder / f"{name}.gguf", name)) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_the_config_is_the_files(files, name):
    family = FAMILIES[name]
    cfg = config_from_gguf(GGUFReader(files[name][0]))
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.ffn_dim, cfg.context_length) == \
        (family.n_layer, family.n_embd, family.n_head, family.n_kv_head, family.ffn_dim, family.context_length)
    assert cfg.rope_theta == family.rope_theta
    assert cfg.rms_eps == float(np.float32(family.rms_eps))  # GGUF keeps it as float32
    assert cfg.vocab_size == files[name][1]["embed.weight"].shape[0]
    assert cfg.tie_embeddings == family.tied
    assert cfg.qkv_bias == (name == "qwen2")
    assert cfg.qk_norm == (name == "qwen3")
    assert cfg.head_dim == (128 if name == "qwen3" else 16)
    assert cfg.head_dim_override == (128 if name == "qwen3" else None)  # None where D = C / H: Llama's config


def test_llama3_rope_scaling_comes_from_the_rope_freqs_tensor(files):
    cfg = config_from_gguf(GGUFReader(files["llama3_scaled"][0]))
    assert cfg.rope_freq_factors == tuple(float(f) for f in llama3_rope_factors(FAMILIES["llama3_scaled"]))
    # the three regimes of rope_type "llama3": high frequencies kept, low ones divided by 8, a blend between
    assert cfg.rope_freq_factors[:3] == (1.0, 1.0, 1.0) and cfg.rope_freq_factors[-4:] == (8.0,) * 4
    assert 1.0 < cfg.rope_freq_factors[3] < 8.0
    assert config_from_gguf(GGUFReader(files["llama"][0])).rope_freq_factors is None


@pytest.mark.parametrize("base", ["llama", "llama3_scaled"])
def test_a_linear_rope_scaling_divides_every_frequency_by_its_factor(base, tmp_path):
    path = tmp_path / "linear.gguf"
    write_family(path, dataclasses.replace(FAMILIES[base], rope_scaling_type="linear", rope_scaling_factor=4.0))
    llama3 = llama3_rope_factors(FAMILIES[base]) if FAMILIES[base].llama3_rope_scaling else [1.0] * 8
    assert config_from_gguf(GGUFReader(path)).rope_freq_factors == tuple(4.0 * float(f) for f in llama3)


@pytest.mark.parametrize("name", NAMES)
def test_every_weight_comes_back_exactly_under_our_names(files, name):
    path, state = files[name]
    loaded = state_dict_from_gguf(GGUFReader(path))
    assert set(loaded) == set(state)  # rope_freqs.weight is config, not a weight
    for key, values in state.items():
        assert loaded[key].dtype == torch.float32
        assert np.array_equal(loaded[key].numpy(), values), key


@pytest.mark.parametrize("name, permuted", [("llama", True), ("qwen2", False), ("qwen3", False)])
def test_only_llama_files_hold_permuted_q_and_k(files, name, permuted):
    path, state = files[name]
    raw = {t.name: np.asarray(t.data) for t in GGUFReader(path).tensors}
    for part in ("q", "k"):
        held = raw[f"blk.0.attn_{part}.weight"].reshape(state[f"blocks.0.attention.{part}.weight"].shape)
        assert np.array_equal(held, state[f"blocks.0.attention.{part}.weight"]) != permuted


@pytest.mark.parametrize("name", ["qwen3", "llama3_scaled"])
def test_the_converted_cache_gives_the_same_config_and_logits(files, name, tmp_path):
    first, meta = load_checkpoint(files[name][0], tmp_path)
    again, meta_2 = load_checkpoint(files[name][0], tmp_path)
    assert meta["converted"] and not meta_2["converted"]
    assert again.cfg == first.cfg  # rope_freq_factors read back from JSON as the same tuple
    ids = torch.randint(0, first.cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(again(ids), first(ids))
