"""The Llama module on `Decoder.small`'s random weights: shapes, causality, padding, the KV-cached
generation against plain greedy decoding, seeded sampling, and RoPE / RMSNorm against float64 formulas."""
from __future__ import annotations

import math

import pytest
import torch

from app.engine.lm.decoder import Decoder, DecoderConfig, RMSNorm
from app.engine.lm.rope import apply_rope, rope_cos_sin, rope_inverse_frequencies


@pytest.fixture(scope="module")
def model() -> Decoder:
    return Decoder.small(seed=0).eval()


def ids_for(seed: int, batch: int, length: int, vocab: int = 300) -> torch.Tensor:
    return torch.randint(3, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_the_small_config_is_the_real_architecture_in_miniature(model):
    cfg = model.cfg
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.vocab_size) == (2, 64, 4, 2, 300)
    assert model.lm_head.weight is model.embed.weight
    names = {name for name, _ in model.named_modules()}
    assert {"embed", "blocks.0.norm_1", "blocks.0.attention.q", "blocks.0.attention.k", "blocks.0.attention.v",
            "blocks.0.attention.o", "blocks.0.norm_2", "blocks.0.mlp.gate", "blocks.0.mlp.up", "blocks.0.mlp.down",
            "norm", "lm_head"} <= names
    assert all(module.bias is None for module in model.modules() if isinstance(module, torch.nn.Linear))


def test_llama_small_is_seeded():
    first, again, other = Decoder.small(3), Decoder.small(3), Decoder.small(4)
    assert torch.equal(first.blocks[0].attention.q.weight, again.blocks[0].attention.q.weight)
    assert not torch.equal(first.blocks[0].attention.q.weight, other.blocks[0].attention.q.weight)


def test_logits_shape(model):
    with torch.no_grad():
        assert model(ids_for(0, 3, 11)).shape == (3, 11, 300)


def test_a_later_token_never_changes_earlier_logits(model):
    ids = ids_for(1, 2, 12)
    changed = ids.clone()
    changed[:, 7:] = ids_for(2, 2, 5)
    with torch.no_grad():
        before, after = model(ids), model(changed)
    assert torch.equal(before[:, :7], after[:, :7])
    assert not torch.allclose(before[:, 7:], after[:, 7:])


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_leaves_the_real_tokens_logits_alone(model, side):
    short, long = ids_for(3, 1, 6), ids_for(4, 1, 10)
    pad = torch.zeros(1, 4, dtype=torch.long)
    padded = torch.cat((pad, short), 1) if side == "left" else torch.cat((short, pad), 1)
    mask = torch.ones_like(padded)
    if side == "left":
        mask[:, :4] = 0
    else:
        mask[:, 6:] = 0
    batch = torch.cat((padded, long))
    batch_mask = torch.cat((mask, torch.ones_like(long)))
    with torch.no_grad():
        alone, together = model(short), model(batch, batch_mask)
        long_alone = model(long)
    real = together[0, 4:] if side == "left" else together[0, :6]
    assert torch.allclose(real, alone[0], atol=1e-5, rtol=0)
    assert torch.allclose(together[1], long_alone[0], atol=1e-5, rtol=0)
    assert torch.isfinite(together).all()  # padding queries see themselves: finite, never NaN


def greedy_without_cache(model: Decoder, ids: torch.Tensor, steps: int) -> torch.Tensor:
    out = ids
    with torch.no_grad():
        for _ in range(steps):
            out = torch.cat((out, model(out)[:, -1].argmax(-1, keepdim=True)), 1)
    return out[:, ids.shape[1]:]


@pytest.mark.parametrize("how", [{"temperature": 0.0}, {"temperature": 1.0, "top_k": 1}])
def test_cached_generation_is_greedy_decoding_without_the_cache(model, how):
    ids = ids_for(5, 3, 7)
    new_ids, new_mask = model.generate(ids, torch.ones_like(ids), 10, generator=torch.Generator().manual_seed(0),
                                       eos_id=-1, **how)
    assert torch.equal(new_ids, greedy_without_cache(model, ids, 10))
    assert new_mask.shape == (3, 10) and bool(new_mask.all())


@pytest.mark.parametrize("side", ["left", "right"])
def test_cached_generation_of_a_padded_batch_is_each_row_alone(model, side):
    short, long = ids_for(6, 1, 4), ids_for(7, 1, 8)
    pad = torch.zeros(1, 4, dtype=torch.long)
    batch = torch.cat((torch.cat((pad, short) if side == "left" else (short, pad), 1), long))
    mask = torch.ones_like(batch)
    if side == "left":
        mask[0, :4] = 0
    else:
        mask[0, 4:] = 0
    new_ids, _ = model.generate(batch, mask, 10, 0.0, torch.Generator(), eos_id=-1)
    assert torch.equal(new_ids[0], greedy_without_cache(model, short, 10)[0])
    assert torch.equal(new_ids[1], greedy_without_cache(model, long, 10)[0])


def test_a_row_stops_at_eos_and_pads_after(model):
    ids = ids_for(8, 2, 5)
    greedy = greedy_without_cache(model, ids, 6)
    eos = int(greedy[0, 2])  # row 0's third token: row 0 stops there
    new_ids, new_mask = model.generate(ids, torch.ones_like(ids), 6, 0.0, torch.Generator(), eos_id=eos, pad_id=0)
    row = greedy[0].tolist()
    stop = row.index(eos)
    assert new_ids[0, : stop + 1].tolist() == row[: stop + 1]
    assert new_mask[0].tolist() == [1] * (stop + 1) + [0] * (new_ids.shape[1] - stop - 1)
    assert (new_ids[0, stop + 1:] == 0).all()


def test_same_seed_same_sample(model):
    ids = ids_for(9, 4, 6)
    mask = torch.ones_like(ids)

    def sample(seed: int, **kw) -> torch.Tensor:
        return model.generate(ids, mask, 12, 1.0, torch.Generator().manual_seed(seed), eos_id=-1, **kw)[0]

    assert torch.equal(sample(1), sample(1))
    assert not torch.equal(sample(1), sample(2))
    assert torch.equal(sample(1, top_k=5), sample(1, top_k=5))


def test_one_blocks_attention_weights_are_kept(model):
    ids = ids_for(10, 2, 9)
    with torch.no_grad():
        model(ids, keep_attention_of=1)
    weights = model.blocks[1].attention.last_weights
    assert model.blocks[0].attention.last_weights is None
    assert weights is not None and weights.shape == (2, 4, 9, 9)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 9))
    assert (weights.triu(diagonal=1) == 0).all()  # causal


def test_rmsnorm_is_the_float64_formula():
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(0))
    norm = RMSNorm(64, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 64))
        got = norm(x)
    x64, w64 = x.double(), norm.weight.double()
    want = x64 / torch.sqrt((x64**2).mean(-1, keepdim=True) + 1e-5) * w64
    assert torch.allclose(got.double(), want, atol=1e-6, rtol=0)


def test_rope_is_the_float64_rotation_of_channel_i_with_channel_i_plus_half():
    head_dim, theta = 16, 10000.0
    x = torch.randn(2, 3, 7, head_dim, generator=torch.Generator().manual_seed(1))  # [B, H, T, D]
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [0, 0, 0, 1, 2, 3, 4]])
    cos, sin = rope_cos_sin(positions, rope_inverse_frequencies(head_dim, theta))
    got = apply_rope(x, cos, sin).double()
    want = torch.empty_like(got)
    half = head_dim // 2
    for b in range(2):
        for t in range(7):
            p = int(positions[b, t])
            for i in range(half):
                angle = p * theta ** (-2 * i / head_dim)
                c, s = math.cos(angle), math.sin(angle)
                a, bb = x[b, :, t, i].double(), x[b, :, t, i + half].double()
                want[b, :, t, i] = a * c - bb * s
                want[b, :, t, i + half] = a * s + bb * c
    assert torch.allclose(got, want, atol=1e-5, rtol=0)


def test_positions_count_real_tokens_only(model):
    ids = ids_for(11, 1, 5)
    mask = torch.tensor([[0, 0, 1, 1, 1]])
    with torch.no_grad():
        implicit = model(ids, mask)
        explicit = model(ids, mask, positions=torch.tensor([[0, 0, 0, 1, 2]]))
    assert torch.equal(implicit, explicit)


def test_config_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="multiple of n_kv_head"):
        DecoderConfig(vocab_size=10, n_layer=1, n_embd=64, n_head=4, n_kv_head=3, ffn_dim=8, rope_theta=1e4,
                    rms_eps=1e-5, context_length=8)
