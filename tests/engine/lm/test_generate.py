"""The app's one sampling loop (app/engine/lm/generate.py): the tiny LM and the real models' decoder draw
through the same function object, and the loop's rules (stop at the end token, pad after it, mask 0 there,
a banned token never drawn, top-k, greedy at temperature 0, a seeded draw repeats) hold for any model."""
from __future__ import annotations

import torch

from app.engine.lm import decoder
from app.engine.lm.decoder import Decoder
from app.engine.lm.generate import Draw, generate
from app.kinds.tiny_lm.engine import lm_sampling
from app.kinds.tiny_lm.engine.tiny_lm import init_tiny_lm


def test_the_tiny_lm_and_the_decoder_share_one_generate():
    assert lm_sampling.generate is generate
    assert decoder.generate is generate


class Scripted:
    """A model whose next-token logits follow a script: row r's k-th call favours tokens[r][k]."""

    def __init__(self, tokens: list[list[int]], vocab: int = 6):
        self.tokens, self.vocab, self.calls, self.fed = tokens, vocab, 0, []

    def __call__(self, new: torch.Tensor) -> torch.Tensor:
        self.fed.append(new.clone())
        logits = torch.zeros(len(self.tokens), self.vocab)
        for row, script in enumerate(self.tokens):
            logits[row, script[min(self.calls, len(script) - 1)]] = 10.0
        self.calls += 1
        return logits


def test_a_row_stops_at_its_end_token_and_holds_padding_after_it():
    model = Scripted([[1, 2, 5, 3], [5, 1, 1, 1], [2, 2, 2, 5]])  # 5 ends a row
    prompt = torch.tensor([[0, 0], [0, 0], [0, 0]])
    new_ids, new_mask = generate(model, prompt, 8, Draw(0.0), torch.Generator(), eos_id=5, pad_id=4)
    assert new_ids.tolist() == [[1, 2, 5, 4], [5, 4, 4, 4], [2, 2, 2, 5]]
    assert new_mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    assert model.fed[0].shape == (3, 2) and all(f.shape == (3, 1) for f in model.fed[1:])
    assert len(model.fed) == 4  # no forward pass after the last row stopped


def test_the_loop_ends_at_max_new_tokens_without_an_extra_forward_pass():
    model = Scripted([[1], [2]])
    new_ids, new_mask = generate(model, torch.zeros(2, 3, dtype=torch.long), 3, Draw(0.0), torch.Generator(), 5, 4)
    assert new_ids.shape == (2, 3) and bool(new_mask.all()) and len(model.fed) == 3


def test_a_banned_token_is_never_drawn_and_top_k_keeps_the_likeliest():
    logits = torch.tensor([[5.0, 4.0, 0.0, -1.0]]).expand(4000, -1)
    banned = Draw(1.0, banned=(0,))(logits, torch.Generator().manual_seed(0))
    assert 0 not in banned.tolist() and set(banned.tolist()) == {1, 2, 3}
    top = Draw(1.0, top_k=2)(logits, torch.Generator().manual_seed(0))
    assert set(top.tolist()) == {0, 1}
    assert Draw(0.0, banned=(0,))(logits[:1], torch.Generator()).tolist() == [1]


def test_a_seeded_draw_repeats_and_temperature_sharpens_it():
    logits = torch.tensor([[1.0, 0.5, 0.0]]).expand(3000, -1)
    first = Draw(1.0)(logits, torch.Generator().manual_seed(3))
    assert torch.equal(first, Draw(1.0)(logits, torch.Generator().manual_seed(3)))
    cold = Draw(0.2)(logits, torch.Generator().manual_seed(3))
    assert (cold == 0).float().mean() > (first == 0).float().mean() + 0.2


def test_both_models_sample_through_it_repeatably():
    tiny = init_tiny_lm(0).eval()
    a = lm_sampling.sample_group(tiny, [1, 2, 3], 4, 6, seed=7)
    b = lm_sampling.sample_group(tiny, [1, 2, 3], 4, 6, seed=7)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.mask, b.mask)
    model = Decoder.small(0).eval()
    ids = torch.tensor([[5, 6, 7]] * 3)
    runs = [model.generate(ids, torch.ones_like(ids), 5, 1.0, torch.Generator().manual_seed(1), eos_id=-1)
            for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0]) and runs[0][0].shape == (3, 5)
