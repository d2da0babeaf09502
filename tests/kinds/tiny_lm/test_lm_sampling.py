"""Sampling a group from the tiny LM: seeded, stops at <end>, padding masked."""
import torch

from app.kinds.tiny_lm.domain.arith_task import END, PAD, TOKEN_ID, encode
from app.kinds.tiny_lm.engine.lm_sampling import sample_group
from app.kinds.tiny_lm.engine.tiny_lm import init_tiny_lm


def test_same_seed_same_group():
    model = init_tiny_lm(0)
    a, b = (sample_group(model, encode("12+3="), 6, 10, seed=7) for _ in range(2))
    assert torch.equal(a.ids, b.ids) and torch.equal(a.mask, b.mask)
    assert not torch.equal(a.ids, sample_group(model, encode("12+3="), 6, 10, seed=8).ids)


def test_each_completion_stops_at_end_and_the_rest_is_masked_padding():
    model = init_tiny_lm(1)
    with torch.no_grad():  # make <end> likely so that completions stop at different lengths
        model.lm_head.weight[TOKEN_ID[END]] += 0.05 * model.norm.weight.sign()
    group = sample_group(model, encode("4+4="), 8, 12, seed=3)
    completion = group.ids[:, group.prompt_length:]
    for row, keep in zip(completion, group.mask, strict=True):
        n = int(keep.sum())
        assert torch.all(keep[:n] == 1) and torch.all(keep[n:] == 0)  # a prefix of real tokens
        assert not torch.any(row[:n] == TOKEN_ID[PAD])  # never sampled
        if n < completion.shape[1]:
            assert int(row[n - 1]) == TOKEN_ID[END] and torch.all(row[n:] == TOKEN_ID[PAD])
    assert all(text.count(END) <= 1 for text in group.completions)
    assert len(set(group.mask.sum(-1).tolist())) > 1  # lengths really differ in this group
