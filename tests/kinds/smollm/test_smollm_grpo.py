"""The real model's GRPO objective (app/kinds/smollm/engine/smollm_grpo.py) on a random small Llama of
the same architecture: the shared token head's numbers (token_grpo_step's, to float64 rounding), its
log-probs equal to a plain log-softmax of the Llama's logits (over the sampling temperature when given one,
through both the recorded forward and the shared-prompt scorer; unchanged at the default 1.0, which the tiny
LM's scorer uses), frozen old/reference copies that share the checkpoint's tensors without touching the
caller's model."""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F  # noqa: N812

from app.engine.grpo.params import Conventions
from app.engine.grpo.token_objective import TokenLogProbs
from app.engine.grpo.token_step import token_grpo_step
from app.engine.lm.decoder import Decoder
from app.kinds.smollm.engine.smollm_grpo import SmolLMGRPO, build_smollm_grpo, share_weights


def group(cfg, g=5, prompt=7, longest=9, seed=0):
    """One prompt, G right-padded completions of different lengths: ids (G, P + T), mask (G, T)."""
    rng = torch.Generator().manual_seed(seed)
    head = torch.randint(3, cfg.vocab_size, (prompt,), generator=rng)
    lengths = [longest, 2, 5, longest - 1, 1][:g]
    tails = torch.randint(3, cfg.vocab_size, (g, longest), generator=rng)
    mask = torch.tensor([[1.0] * n + [0.0] * (longest - n) for n in lengths], dtype=torch.float64)
    ids = torch.cat([head.expand(g, -1), tails * mask.long()], dim=1)
    return ids, mask, prompt


@pytest.fixture(scope="module")
def base():
    return Decoder.small(seed=1).double()


@pytest.mark.parametrize("conventions", [Conventions(), Conventions(preset="trl", beta=0.1),
                                         Conventions(preset="verl", kl_placement="reward")],
                         ids=["deepseekmath", "trl", "verl-kl-in-reward"])
def test_the_module_is_token_grpo_step(base, conventions):
    ids, mask, prompt = group(base.cfg)
    grpo = build_smollm_grpo(base, conventions)
    with torch.no_grad():  # the policy has moved since sampling: rho != 1
        for p in grpo.policy.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2), dtype=p.dtype) * 0.02)
    rewards = torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0], dtype=torch.float64)
    out = grpo(ids, mask, rewards, prompt)
    step = token_grpo_step(out["logp"], out["logp_old"], out["logp_ref"], rewards, mask, conventions)
    assert torch.allclose(out["loss"], step.loss, rtol=1e-13, atol=0)
    assert torch.equal(out["clip_active"], step.clip_active)
    assert not torch.allclose(out["ratio"][mask.bool()], torch.ones(int(mask.sum()), dtype=torch.float64))
    # log pi of each completion token: a plain log-softmax of the model's logits, read at the next token
    logits = base(ids)[:, prompt - 1:-1]
    expected = F.log_softmax(logits, dim=-1).gather(-1, ids[:, prompt:].unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(out["logp_ref"], expected, rtol=0, atol=1e-12)


def test_the_gradient_reaches_only_the_policy(base):
    ids, mask, prompt = group(base.cfg)
    grpo = build_smollm_grpo(base, Conventions(beta=0.04))
    grpo(ids, mask, torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0], dtype=torch.float64), prompt)["loss"].backward()
    policy_grads = [p.grad for p in grpo.policy.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in policy_grads)
    assert sum(float(g.abs().sum()) for g in policy_grads) > 0
    assert all(p.grad is None and not p.requires_grad for m in (grpo.old_policy, grpo.reference_policy)
               for p in m.parameters())


def test_old_and_reference_share_the_checkpoint_and_leave_it_alone(base):
    before = {k: v.clone() for k, v in base.state_dict().items()}
    grpo = build_smollm_grpo(base, Conventions())
    for name, p in base.named_parameters():
        for copy in (grpo.old_policy, grpo.reference_policy):
            assert copy.get_parameter(name).data_ptr() == p.data_ptr(), name   # no second copy in memory
    assert grpo.reference_policy.lm_head.weight is grpo.reference_policy.embed.weight  # still tied
    # the policy, built on the meta device and loaded: tied too (a gradient reaches the one matrix from both
    # uses), and its weights and RoPE frequencies are the checkpoint's
    assert grpo.policy.lm_head.weight is grpo.policy.embed.weight
    assert all(torch.equal(grpo.policy.state_dict()[k], v) for k, v in base.state_dict().items())
    assert torch.equal(grpo.policy.inverse_frequencies, base.inverse_frequencies)
    assert grpo.policy.embed.weight.data_ptr() != base.embed.weight.data_ptr()          # the policy is its own
    with torch.no_grad():
        for p in grpo.policy.parameters():
            p.add_(1.0)
    assert all(p.requires_grad for p in base.parameters())
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())


def test_share_weights_on_a_fresh_module():
    source, target = Decoder.small(seed=3), Decoder.small(seed=4)
    share_weights(target, source)
    ids = torch.randint(0, source.cfg.vocab_size, (2, 6))
    assert torch.equal(source(ids), target(ids))
    assert isinstance(SmolLMGRPO(source.cfg), SmolLMGRPO)


@pytest.mark.parametrize("temperature", [0.5, 1.3])
def test_every_scorer_reads_logits_over_the_temperature(base, temperature):
    """The three copies' log-probs, by the recorded forward and by ScoredDecoder.score, are log_softmax(logits / T)
    (TRL's fused LM head scales each logit by 1 / temperature; verl divides)."""
    ids, mask, prompt = group(base.cfg)
    grpo = build_smollm_grpo(base, Conventions(beta=0.04), temperature=temperature)
    out = grpo(ids, mask, torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0], dtype=torch.float64), prompt)
    logits = base(ids)[:, prompt - 1:-1]
    expected = F.log_softmax(logits / temperature, dim=-1).gather(-1, ids[:, prompt:].unsqueeze(-1)).squeeze(-1)
    for name in ("logp", "logp_old", "logp_ref"):
        assert torch.allclose(out[name], expected, rtol=0, atol=1e-12), name
    for scorer in (grpo.policy, grpo.old_policy, grpo.reference_policy):
        assert scorer.temperature == temperature
        assert torch.allclose(scorer.score(ids, prompt), expected, rtol=0, atol=1e-12)
    assert torch.equal(out["ratio"] * mask, mask)  # the policy is still the checkpoint: ρ = 1


def test_the_default_temperature_leaves_the_log_softmax_alone():
    """TokenLogProbs() (the tiny LM's) is the plain log-softmax, bit for bit: 1.0 divides nothing."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=generator)
    ids = torch.randint(0, 11, (3, 7), generator=generator)
    plain = F.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)[:, 2:]
    assert TokenLogProbs().temperature == 1.0
    assert torch.equal(TokenLogProbs()(logits, ids, 3), plain)


def test_an_untied_checkpoint_gives_an_untied_policy():
    from dataclasses import replace

    from app.engine.lm.decoder import Decoder
    small = Decoder.small(seed=5)
    untied = Decoder(replace(small.cfg, tie_embeddings=False))
    weights = small.state_dict()
    with torch.no_grad():
        for name, p in untied.named_parameters():  # the head: twice the embedding, so the two differ
            p.copy_(2.0 * weights["embed.weight"] if name == "lm_head.weight" else weights[name])
    grpo = build_smollm_grpo(untied, Conventions())
    assert grpo.policy.lm_head.weight is not grpo.policy.embed.weight
    assert torch.equal(grpo.policy.lm_head.weight, untied.lm_head.weight)
    assert torch.equal(grpo.policy.embed.weight, untied.embed.weight)
