"""The decoder's family switches (app/engine/lm/decoder.py) are used, and change nothing when off: Qwen2's q/k/v
biases and Qwen3's per-head q/k norms move the logits when zeroed; the norms are applied to each head
before RoPE; Qwen3's head width is its own; Llama 3's RoPE factors divide the frequencies; the KV-cached
path (`completion_logits`) equals the plain forward with each switch on; a default config builds the
modules and state dict it built before."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from gguf_families import write_family

from app.engine.lm.decoder import Decoder, DecoderConfig
from app.engine.lm.gguf_file import load_checkpoint
from app.engine.lm.rope import rope_inverse_frequencies

IDS = torch.tensor([[5, 80, 33, 100, 257, 9, 44, 12, 200, 201, 202, 3]])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    loaded = {}
    for name in ("llama", "qwen2", "qwen3", "llama3_scaled"):
        write_family(folder / f"{name}.gguf", name)
        loaded[name] = load_checkpoint(folder / f"{name}.gguf", folder / "cache")[0]
    return loaded


def logits(model: Decoder) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS)


def relative_change(before: torch.Tensor, after: torch.Tensor) -> float:
    return float((after - before).abs().max() / before.abs().max())


@pytest.mark.parametrize("name, parameter", [("qwen2", "attention.q.bias"), ("qwen2", "attention.k.bias"),
                                             ("qwen2", "attention.v.bias"), ("qwen3", "attention.q_norm.weight"),
                                             ("qwen3", "attention.k_norm.weight")])
def test_the_familys_own_weights_are_used(models, name, parameter):
    model = models[name]
    before = logits(model)
    original = [block.get_parameter(parameter).detach().clone() for block in model.blocks]
    try:
        with torch.no_grad():
            for block in model.blocks:
                block.get_parameter(parameter).fill_(0.0 if parameter.endswith("bias") else 1.0)
        assert relative_change(before, logits(model)) > 1e-3
    finally:
        with torch.no_grad():
            for block, values in zip(model.blocks, original, strict=True):
                block.get_parameter(parameter).copy_(values)
    assert torch.equal(logits(model), before)


def test_qwen3s_norms_act_on_each_head_before_rope(models):
    """What RoPE receives: each head's D = 128 channels with mean square 1 when the norm's weight is 1."""
    model = models["qwen3"]
    attention = model.blocks[0].attention
    assert attention.q.weight.shape == (4 * 128, 64) and attention.o.weight.shape == (64, 4 * 128)
    seen = {}
    handle = attention.rope.register_forward_hook(lambda module, inputs, output: seen.update(q=inputs[0], k=inputs[1]))
    weights = (attention.q_norm.weight.detach().clone(), attention.k_norm.weight.detach().clone())
    try:
        with torch.no_grad():
            attention.q_norm.weight.fill_(1.0)
            attention.k_norm.weight.fill_(1.0)
            model(IDS)
    finally:
        handle.remove()
        with torch.no_grad():
            attention.q_norm.weight.copy_(weights[0])
            attention.k_norm.weight.copy_(weights[1])
    assert seen["q"].shape == (1, 4, IDS.shape[1], 128) and seen["k"].shape == (1, 2, IDS.shape[1], 128)
    for heads in (seen["q"], seen["k"]):
        torch.testing.assert_close(heads.pow(2).mean(dim=-1), torch.ones(heads.shape[:-1]), atol=1e-4, rtol=0)


def test_llama3_rope_factors_divide_the_frequencies_and_change_the_logits(models):
    scaled, plain = models["llama3_scaled"], models["llama"]
    factors = torch.tensor(scaled.cfg.rope_freq_factors)
    torch.testing.assert_close(scaled.inverse_frequencies, plain.inverse_frequencies / factors, atol=0, rtol=0)
    # the same weights, with and without the scaling: the logits move (position 0 has no angle to scale)
    unscaled = Decoder(dataclasses.replace(scaled.cfg, rope_freq_factors=None)).eval()
    unscaled.load_state_dict(scaled.state_dict())
    with_scaling, without = logits(scaled), logits(unscaled)
    assert torch.equal(with_scaling[:, 0], without[:, 0])
    assert relative_change(without, with_scaling) > 1e-3


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3", "llama3_scaled"])
def test_the_cached_path_equals_the_plain_forward(models, name):
    model = models[name]
    prompt = IDS[:, :5]
    ids = torch.cat([prompt.expand(3, -1), torch.tensor([[7, 8, 9], [10, 11, 12], [257, 258, 259]])], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model.completion_logits(ids, 5), model(ids[:, :-1])[:, 4:], atol=1e-5, rtol=0)


def test_a_default_config_builds_llamas_modules_and_frequencies_unchanged():
    cfg = DecoderConfig(vocab_size=300, n_layer=1, n_embd=64, n_head=4, n_kv_head=2, ffn_dim=160, rope_theta=1e4,
                        rms_eps=1e-5, context_length=256)
    model = Decoder(cfg)
    attention = model.blocks[0].attention
    assert attention.q.bias is None and attention.k.bias is None and attention.v.bias is None
    assert attention.q_norm is None and attention.k_norm is None
    assert not any("norm" in name and "attention" in name for name in model.state_dict())
    expected = 1.0 / (1e4 ** (torch.arange(0, 16, 2, dtype=torch.int64).float() / 16))
    assert torch.equal(model.inverse_frequencies, expected)
    assert torch.equal(rope_inverse_frequencies(16, 1e4, None), expected)


def test_the_config_checks_its_rope_factors_and_head_width():
    base = {"vocab_size": 10, "n_layer": 1, "n_embd": 62, "n_head": 4, "n_kv_head": 2, "ffn_dim": 8, "rope_theta": 1e4,
            "rms_eps": 1e-5, "context_length": 8}
    assert DecoderConfig(**base, head_dim_override=32).head_dim == 32  # 62 / 4 is no width; the override is one
    with pytest.raises(ValueError, match="multiple of n_head"):
        DecoderConfig(**base)
    with pytest.raises(ValueError, match="3 RoPE frequency factors for a head of 32 channels"):
        DecoderConfig(**base, head_dim_override=32, rope_freq_factors=(1.0, 2.0, 3.0))
    listed = DecoderConfig(**base, head_dim_override=4, rope_freq_factors=[1.0, 8.0])  # as read back from JSON
    assert listed.rope_freq_factors == (1.0, 8.0)
