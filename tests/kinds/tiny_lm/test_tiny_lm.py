"""The tiny LM of issue 13: size, causality, determinism and per-token log-probs."""
import torch

from app.kinds.tiny_lm.domain.arith_task import END, THINK, encode
from app.kinds.tiny_lm.engine.tiny_lm import TinyLMConfig, completion_logprobs, init_tiny_lm


def test_size_is_within_the_issue_s_range():
    n = sum(p.numel() for p in init_tiny_lm(0).parameters())
    assert 50_000 <= n <= 200_000, n


def test_same_seed_same_weights_other_seed_other_weights():
    a, b, c = init_tiny_lm(1), init_tiny_lm(1), init_tiny_lm(2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))


def test_a_token_never_sees_the_future():
    model = init_tiny_lm(3)
    ids = torch.tensor([encode("12+3=" + THINK + "15")])
    changed = ids.clone()
    changed[0, -1] = encode("9")[0]
    before, after = model(ids), model(changed)
    torch.testing.assert_close(before[:, :-1], after[:, :-1], rtol=0, atol=0)  # earlier positions: identical
    assert not torch.equal(before[:, -1], after[:, -1])


def test_attention_weights_are_causal_rows_that_sum_to_one():
    model = init_tiny_lm(4)
    model(torch.tensor([encode("7+d=" + END)]), keep_attention=True)
    weights = model.blocks[0].attention.last_weights  # (1, H, T, T)
    assert weights.shape == (1, TinyLMConfig().n_head, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, TinyLMConfig().n_head, 5, dtype=torch.float64))
    assert torch.all(weights.triu(1) == 0)


def test_completion_logprobs_are_the_log_softmax_of_each_next_token():
    model = init_tiny_lm(5)
    prompt, completion = encode("7+5="), encode(THINK + "12")
    ids = torch.tensor([prompt + completion])
    got = completion_logprobs(model, ids, len(prompt))
    assert got.shape == (1, len(completion))
    for t, token in enumerate(completion):  # independently: one forward per prefix
        prefix = torch.tensor([prompt + completion[:t]])
        want = torch.log_softmax(model(prefix)[0, -1], dim=-1)[token]
        torch.testing.assert_close(got[0, t], want, rtol=1e-12, atol=1e-12)
