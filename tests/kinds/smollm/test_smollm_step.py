"""The real model's live step (app/kinds/smollm/engine/step.py) on the tiny GGUF (smollm_tiny_gguf.py: Decoder.small's
random weights, a 300-token byte-level vocabulary, SmolLM2's ChatML template), so no checkpoint is needed:

- the recorded head (advantages, ratio, clipped, divergence, aggregate, the loss) is token_grpo_step's on the
  recorded log-probs, to 1e-6 in float32 and 1e-12 in float64;
- an independent recomputation (a plain copy of the model, plain AdamW with the params' betas and eps, torch's
  clip_grad_norm_ before each step, plain log-softmax(logits / temperature) log-probs) reaches the same policy:
  its log-probs, ∂loss/∂log π by torch.autograd.grad, each block's ‖∂loss/∂W‖, block b's attention weights
  (Attention.keep_weights) and the update's Δ log π equal the recorded ones;
- the temperature reaches every log-prob (π_old, π_ref, π, π after the update: a plain float64
  log_softmax(logits / T) gather), at μ = 1 every ratio is exactly 1 and nothing clips, and the recorded
  gradient is clipped to max_grad_norm (its norm before clipping reported);
- the loss splits into its surrogate and KL parts; the same params give the same step; bounds are refused.
"""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from pydantic import ValidationError
from smollm_tiny_gguf import write_tiny_gguf
from torch.nn import functional as F  # noqa: N812

from app.engine.grpo.token_step import token_grpo_step
from app.kinds.smollm.domain.tasks import RewardPart, Task
from app.kinds.smollm.engine import checkpoint
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.smollm.engine.step import run_smol_step

# rewards a random model's byte soup earns sometimes, so the group's rewards differ
FAKE_TASKS = (
    Task("fake", "Say hello.", "e", (
        RewardPart("accuracy", lambda text: float("e" in text), "1 when the reply holds an 'e'."),
        RewardPart("brevity", lambda text: 0.5 * (len(text) % 3 == 0), "0.5 when its length is a multiple of 3."))),
)
SMALL = {"group_size": 6, "max_new_tokens": 8, "inner_steps": 2, "learning_rate": 1e-3, "attention_block": 1,
         "seed": 3, "prompt": 0}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMOLLM_GGUF", str(path))
        return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


@pytest.fixture(scope="module")
def tiny64(tiny):
    return dataclasses.replace(tiny, model=copy.deepcopy(tiny.model).double())


def step(loaded, **overrides):
    return run_smol_step(SmolParams(**{**SMALL, **overrides}), loaded, tasks=FAKE_TASKS)


def tensor(values, dtype):
    return torch.tensor(values, dtype=dtype)


@pytest.mark.parametrize(("which", "dtype", "tol"), [("tiny", torch.float32, 1e-6), ("tiny64", torch.float64, 1e-12)])
@pytest.mark.parametrize("preset", ["deepseekmath", "trl"])
def test_the_recorded_head_is_token_grpo_step(which, dtype, tol, preset, request):
    result = step(request.getfixturevalue(which), preset=preset)
    assert result.dtype == str(dtype).removeprefix("torch.")
    assert len(set(result.rewards)) > 1, "the fake rewards must differ for this seed"
    h = {k: tensor(v.values, dtype) for k, v in result.head.items() if v.dtype.startswith("float")}
    mask = tensor(result.mask, dtype)
    rewards = tensor(result.rewards, dtype)
    ref = token_grpo_step(h["policy.token_logprobs"], h["old_policy.token_logprobs"],
                          h["reference_policy.token_logprobs"], rewards, mask, result.params.conventions())
    pairs = {"advantages": ref.advantages, "ratio": ref.ratio, "clipped": ref.surrogate, "divergence": ref.kl}
    for node, want in pairs.items():
        got = h[node] * mask if want.dim() == 2 else h[node]
        assert torch.allclose(got, want, rtol=0, atol=tol), node
    assert abs(float(h["aggregate"]) - float(ref.objective)) <= tol
    assert abs(result.loss - float(ref.loss)) <= tol and abs(result.objective + result.loss) <= tol
    assert abs(result.loss_surrogate + result.loss_kl - result.loss) <= tol
    on = mask.bool()
    assert not torch.allclose(h["ratio"][on], torch.ones_like(h["ratio"][on]))  # μ steps moved the policy
    assert result.head["advantages"].grad is None and result.head["advantages"].no_grad_reason


def independent(loaded, result):
    """The policy the step reached, recomputed without the step's code: a copy of the model, AdamW, plain
    log-softmax log-probs and token_grpo_step."""
    params = result.params
    ids, mask = torch.tensor(result.ids), torch.tensor(result.mask, dtype=torch.float64)
    rewards, prompt = torch.tensor(result.rewards, dtype=torch.float64), result.prompt_length
    base = loaded.model

    def logprobs(model, keep=None):
        logits = model(ids[:, :-1], keep_attention_of=keep)[:, prompt - 1:] / params.temperature
        return F.log_softmax(logits, dim=-1).gather(-1, ids[:, prompt:].unsqueeze(-1)).squeeze(-1)

    def clipped_step():
        torch.nn.utils.clip_grad_norm_(policy.parameters(), params.max_grad_norm)
        optimiser.step()

    policy = copy.deepcopy(base)
    with torch.no_grad():
        logp_old = logprobs(base)
    optimiser = torch.optim.AdamW(policy.parameters(), lr=params.learning_rate, weight_decay=params.weight_decay,
                                  betas=(params.adam_beta1, params.adam_beta2), eps=params.adam_epsilon)
    c = params.conventions()
    for _ in range(params.inner_steps - 1):  # the recorded step is the μ-th
        optimiser.zero_grad()
        token_grpo_step(logprobs(policy), logp_old, logp_old, rewards, mask, c).loss.backward()
        clipped_step()
    optimiser.zero_grad()
    logp = logprobs(policy, keep=params.attention_block)
    loss = token_grpo_step(logp, logp_old, logp_old, rewards, mask, c).loss
    (grad_logp,) = torch.autograd.grad(loss, logp, retain_graph=True)
    loss.backward()
    norms = [float(torch.sqrt(sum(p.grad.pow(2).sum() for p in block.parameters()))) for block in policy.blocks]
    weights = policy.blocks[params.attention_block].attention.last_weights
    clipped_step()
    with torch.no_grad():
        after = logprobs(policy)
    return logp.detach(), grad_logp, norms, weights, after


@pytest.mark.parametrize("overrides", [{"beta": 0.1}, {"beta": 0.1, "inner_steps": 3, "temperature": 0.6,
                                                   "max_grad_norm": 0.5, "adam_beta2": 0.99, "adam_epsilon": 1e-6}],
                         ids=["mu2", "mu3-T0.6-clip0.5"])
def test_an_independent_recomputation_gives_the_same_gradients(tiny64, overrides):
    result = step(tiny64, **overrides)
    logp, grad_logp, norms, weights, after = independent(tiny64, result)
    mask = torch.tensor(result.mask, dtype=torch.float64)
    head = result.head["policy.token_logprobs"]
    assert torch.allclose(torch.tensor(head.values, dtype=torch.float64) * mask, logp * mask, rtol=0, atol=1e-10)
    assert torch.allclose(torch.tensor(head.grad, dtype=torch.float64), grad_logp, rtol=0, atol=1e-12)
    assert result.block_grad_norms == pytest.approx(norms, rel=1e-9)
    assert result.policy_grad_norm >= max(result.block_grad_norms) > 0
    for i, completion in enumerate(result.completions):
        n = result.prompt_length + completion.length - 1
        assert torch.allclose(torch.tensor(result.attention[i], dtype=torch.float64), weights[i, :, :n, :n], rtol=0, atol=1e-12)
        for t, token in enumerate(completion.tokens):
            assert token.grad == pytest.approx(float(grad_logp[i, t]), abs=1e-12)
            assert token.grad == pytest.approx(token.grad_surrogate + token.grad_kl, abs=1e-12)
            assert token.logp_after == pytest.approx(float(after[i, t]), abs=1e-9)
    moved = [abs(m.delta) for m in result.moved]
    assert len(moved) == 10 and moved == sorted(moved, reverse=True)
    every = [abs(t.logp_after - t.logp) for c in result.completions for t in c.tokens]
    assert moved[0] == pytest.approx(max(every))


def plain_logprobs(model, result, temperature):
    """log π of every completion token, written out in float64: log_softmax(logits / T) read at the next token."""
    ids, prompt = torch.tensor(result.ids), result.prompt_length
    with torch.no_grad():
        logits = model.double()(ids[:, :-1])[:, prompt - 1:] / temperature
    return F.log_softmax(logits, dim=-1).gather(-1, ids[:, prompt:].unsqueeze(-1)).squeeze(-1)


def test_the_temperature_reaches_every_log_prob(tiny64):
    """At T = 0.6, log π_old, log π_ref and log π (μ = 1: all the checkpoint) in the head and in every token's
    record equal a plain float64 log_softmax(logits / T) gather, and log π after the update is the updated
    policy's at the same T (the independent test above); at T = 1 the numbers would differ."""
    result = step(tiny64, inner_steps=1, temperature=0.6, beta=0.04)
    assert result.logprob_temperature == 0.6
    want = plain_logprobs(copy.deepcopy(tiny64.model), result, 0.6)
    untempered = plain_logprobs(copy.deepcopy(tiny64.model), result, 1.0)
    mask = torch.tensor(result.mask, dtype=torch.float64)
    on = mask.bool()
    assert not torch.allclose(want[on], untempered[on], rtol=0, atol=1e-3)
    for node in ("old_policy.token_logprobs", "reference_policy.token_logprobs", "policy.token_logprobs"):
        assert torch.allclose(tensor(result.head[node].values, torch.float64)[on], want[on], rtol=0, atol=1e-12), node
    for i, completion in enumerate(result.completions):
        for t, token in enumerate(completion.tokens):
            for got in (token.logp, token.logp_old, token.logp_ref):
                assert got == pytest.approx(float(want[i, t]), abs=1e-12)


def test_at_mu_1_every_ratio_is_1_and_nothing_clips(tiny):
    """TRL's num_iterations = 1: the recorded step is the policy's first update on the group, so π = π_old to
    the bit (the same weights, the same forward) and every ρ is exactly 1, in float32 too."""
    result = step(tiny, inner_steps=1)
    mask = torch.tensor(result.mask)
    on = mask.bool()
    assert torch.equal(tensor(result.head["policy.token_logprobs"].values, torch.float32)[on],
                       tensor(result.head["old_policy.token_logprobs"].values, torch.float32)[on])
    assert torch.equal(tensor(result.head["ratio"].values, torch.float32)[on], torch.ones(int(on.sum())))
    tokens = [t for c in result.completions for t in c.tokens]
    assert all(t.ratio == 1.0 and not t.clip_active for t in tokens)
    assert result.earlier_grad_norms == () and result.stage_seconds["inner steps"] < 1


def test_at_mu_1_log_pi_old_is_the_recorded_pass_own(tiny, monkeypatch):
    """At μ = 1 no pass scores π_old before the recorded one (TRL takes the policy's detached log-probs as
    old_per_token_logps then): the table's log π_old is the recorded old policy's, token for token."""
    from app.kinds.smollm.engine import smollm_grpo
    calls = []
    real = smollm_grpo.ScoredDecoder.score
    monkeypatch.setattr(smollm_grpo.ScoredDecoder, "score", lambda self, *a: calls.append(self) or real(self, *a))
    result = step(tiny, inner_steps=1)
    assert len(calls) == 1  # log π after the update only: neither π_old before the step nor an earlier iteration
    recorded = tensor(result.head["old_policy.token_logprobs"].values, torch.float32)
    for i, completion in enumerate(result.completions):
        assert [t.logp_old for t in completion.tokens] == pytest.approx(recorded[i, :len(completion.tokens)].tolist(),
                                                                        abs=0)


@pytest.mark.parametrize("max_grad_norm", [1.0, 0.25])
def test_the_gradient_is_clipped_to_max_grad_norm(tiny, max_grad_norm):
    """The recorded gradient (and every earlier iteration's) is larger than max_grad_norm here: clipping brings it
    to at most max_grad_norm (float32 gradients, measured in float64: within 1e-6); the norm before clipping is
    the step's float64 ‖∂loss/∂θ‖. max_grad_norm = 0 leaves it as it is."""
    result = step(tiny, max_grad_norm=max_grad_norm)
    assert result.grad_norm_before_clip == pytest.approx(result.policy_grad_norm, rel=1e-12)
    assert result.grad_norm_before_clip > max_grad_norm
    assert result.grad_norm_after_clip <= max_grad_norm * (1 + 1e-6)
    assert result.grad_norm_after_clip == pytest.approx(max_grad_norm, rel=1e-5)
    assert len(result.earlier_grad_norms) == 1 and result.earlier_grad_norms[0] > max_grad_norm
    unclipped = step(tiny, max_grad_norm=0)
    assert unclipped.grad_norm_after_clip == pytest.approx(unclipped.grad_norm_before_clip, rel=1e-12)


def test_block_nodes_are_summarised_per_token(tiny):
    result = step(tiny)
    groups, length = len(result.ids), len(result.ids[0]) - 1
    for node in ("policy.blocks.0.norm_1", "policy.blocks.1.attention.q", "policy.blocks.0.attention.rope",
                 "softmax@policy.blocks.1.attention#0", "policy.blocks.0.mlp.gate", "add@policy.blocks.1#1",
                 "old_policy.blocks.0.mlp.down", "policy.lm_head"):
        wide = result.wide[node]
        assert len(wide.value_norm) == groups and len(wide.value_norm[0]) == length, node
        assert len(wide.top_dims) == 5
        frozen = node.startswith("old_policy")
        assert (wide.grad_norm is None) == frozen and (wide.summary.no_grad_reason is not None) == frozen
    q = result.wide["policy.blocks.1.attention.q"]
    assert q.shape[-1] == 64 and q.top_dims[0][1] >= q.top_dims[-1][1]
    assert {"advantages", "ratio", "clipped", "divergence", "aggregate", "policy.token_logprobs",
            "old_policy.token_logprobs", "reference_policy.token_logprobs"} <= set(result.head)
    assert not any(k.startswith("policy.blocks") for k in result.head)
    assert len(result.block_grad_norms) == 2 and set(result.stage_seconds) == {
        "sampling", "scoring", "inner steps", "record", "summaries", "update"}
    assert result.peak_rss_mb is not None and result.peak_rss_mb > 0


def test_the_same_params_give_the_same_step_and_report_progress(tiny):
    seen: list[tuple[str, int, int]] = []
    one = run_smol_step(SmolParams(**SMALL), tiny, tasks=FAKE_TASKS, progress=lambda *a: seen.append(a))
    two = step(tiny)
    assert one.ids == two.ids and one.loss == two.loss and one.block_grad_norms == two.block_grad_norms
    assert one.head["policy.token_logprobs"].grad == two.head["policy.token_logprobs"].grad
    assert step(tiny, seed=4).ids != one.ids
    stages = [s for s, _, _ in seen]
    assert stages[0] == "sampling" and ("inner step", 1, 1) in seen and "backward" in stages and stages[-1] == "update"


@pytest.mark.parametrize("inner_steps", [1, 3])
def test_the_progress_bar_weighs_only_the_inner_steps_a_step_takes(inner_steps):
    from app.kinds.smollm.engine.step_task import progress_adapter

    seen: list[tuple[str, int, int, int]] = []
    report = progress_adapter(lambda *args: seen.append(args), inner_steps)
    report("old policy", 1, 1)
    for k in range(inner_steps - 1):
        report("inner step", k + 1, inner_steps - 1)
    report("forward", 0, 1)
    report("update", 1, 1)
    done = [d for _, _, d, _ in seen]
    assert done == sorted(done) and done[-1] == seen[-1][3]  # it ends full, never going back
    assert done[-2] == done[-3]  # "forward" starts where the stage before it ended: no weight left unreported


@pytest.mark.parametrize(("field", "value"), [
    ("group_size", 1), ("group_size", 17), ("max_new_tokens", 3), ("max_new_tokens", 97), ("temperature", 0.05),
    ("temperature", 1.6), ("inner_steps", 0), ("inner_steps", 5), ("learning_rate", 0.0), ("learning_rate", 0.1),
    ("prompt", -1), ("prompt", 99), ("attention_block", 256), ("seed", -1), ("beta", -1.0), ("max_grad_norm", -1.0),
    ("adam_beta1", 1.0), ("adam_beta2", -0.1), ("adam_epsilon", 0.0), ("weight_decay", -0.1)])
def test_bounds_are_refused_naming_the_field(field, value):
    with pytest.raises(ValidationError) as refused:
        SmolParams(**{field: value})
    assert {e["loc"][0] for e in refused.value.errors()} == {field}


def test_a_prompt_too_long_for_the_context_is_refused(tiny):
    with pytest.raises(ValidationError) as refused:
        SmolParams.model_validate({"max_new_tokens": 96}, context={"prompt_tokens": [8150], "context_length": 8192})
    assert [e["loc"] for e in refused.value.errors()] == [("max_new_tokens",)]
    assert SmolParams.model_validate({"max_new_tokens": 42}, context={"prompt_tokens": [8150],
                                                                      "context_length": 8192}).max_new_tokens == 42
    short = dataclasses.replace(tiny, model=copy.deepcopy(tiny.model))
    object.__setattr__(short.model, "cfg", dataclasses.replace(tiny.model.cfg, context_length=40))
    with pytest.raises(ValidationError, match="max_new_tokens"):
        step(short)
    with pytest.raises(ValidationError, match="attention_block"):
        step(tiny, attention_block=2)  # the tiny model has 2 blocks
    assert SmolParams(max_new_tokens=20).max_length == 20 and SmolParams(max_new_tokens=20, max_length=7).max_length == 7


def float64_wide(tensor, positions, grad):
    """The summaries as float64 sums over float64 copies: what node_summaries.wide_node's float32 sums replace."""
    from app.kinds.smollm.engine.node_summaries import _per_token, token_axis
    axis = token_axis(tensor, *positions.shape)
    values = _per_token(tensor, axis).double()
    g = _per_token(grad, axis).double()
    return {"value_norm": values.norm(dim=-1), "grad_norm": g.norm(dim=-1), "mean_abs": values.abs()[positions].mean(0),
            "norm": values.norm(), "mean": values.mean(), "grad_total": g.norm(), "grad_max": g.abs().max()}


@pytest.mark.parametrize("shape", [(4, 7, 49152), (4, 7, 1536), (4, 3, 7, 64)])
def test_float32_summaries_agree_with_float64_to_1e6(shape):
    from app.kinds.smollm.engine.node_summaries import wide_node
    generator = torch.Generator().manual_seed(0)
    tensor = torch.randn(shape, generator=generator) * 30 + 2
    grad = torch.randn(shape, generator=generator) * 1e-4
    positions = torch.ones(4, 7, dtype=torch.bool)
    positions[1, 5:] = positions[3, 2:] = False
    node = wide_node("policy.x", tensor, positions, grad)
    want = float64_wide(tensor, positions, grad)

    def close(got, expected, rel=1e-6):
        assert torch.allclose(torch.tensor(got, dtype=torch.float64), expected, rtol=rel, atol=0)

    close(node.value_norm, want["value_norm"])
    close(node.grad_norm, want["grad_norm"])
    close([v for _, v in node.top_dims], want["mean_abs"][[i for i, _ in node.top_dims]])
    close(node.summary.value_norm, want["norm"])
    close(node.summary.value_mean, want["mean"], rel=1e-12)  # accumulated in float64 as before
    close(node.summary.grad_norm, want["grad_total"])
    assert node.summary.grad_abs_max == float(want["grad_max"])
    assert node.summary.value_min == float(tensor.min()) and node.summary.value_max == float(tensor.max())


def test_a_non_finite_node_takes_the_float64_path():
    from app.kinds.smollm.engine.node_summaries import wide_node
    tensor = torch.ones(2, 3, 4)
    tensor[0, 1, 2] = float("-inf")
    node = wide_node("old_policy.x", tensor, torch.ones(2, 3, dtype=torch.bool), None)
    assert node.value_norm[0][1] == pytest.approx(3 ** 0.5) and node.summary.value_min == 1.0
    assert node.grad_norm is None and node.summary.no_grad_reason.startswith("frozen")


def test_the_reference_read_from_the_old_policy_equals_running_it(tiny, monkeypatch):
    """The recorded pass skips the reference's forward (step.reference_read_from_old: it is the old policy's twin).
    Run with the forward, every node (head and wide, values, gradients, order, no-grad reasons) is the same."""
    import app.kinds.smollm.engine.step as step_module

    skipped = step(tiny, beta=0.05)
    monkeypatch.setattr(step_module, "same_tensors", lambda a, b: False)
    ran = step(tiny, beta=0.05)
    assert list(skipped.head) == list(ran.head) and list(skipped.wide) == list(ran.wide)
    assert skipped.head == ran.head
    assert skipped.wide == ran.wide
    references = [k for k in ran.wide if k.split("@")[-1].startswith("reference_policy.")]
    assert len(references) == len([k for k in ran.wide if k.split("@")[-1].startswith("old_policy.")]) > 30
    assert ran.wide[references[0]].summary.no_grad_reason.startswith("frozen: the reference")


def test_same_tensors_tells_a_shared_copy_from_a_trained_one(tiny):
    from app.kinds.smollm.engine.step import build_objective, same_tensors

    grpo = build_objective(tiny.model, SmolParams(**SMALL).conventions())
    assert same_tensors(grpo.reference_policy, grpo.old_policy)
    assert not same_tensors(grpo.policy, grpo.old_policy)  # a copy of its own, trained


def test_the_shared_prompt_scorer_equals_the_recorded_forward(tiny64):
    """ScoredDecoder.score (the prompt once, the LM head on the scored positions) against forward, in float64,
    values and every weight's gradient; rows that do not share one prompt are refused."""
    from app.kinds.smollm.engine.smollm_grpo import ScoredDecoder

    model = ScoredDecoder(tiny64.model.cfg).double()
    model.load_state_dict(tiny64.model.state_dict())
    generator = torch.Generator().manual_seed(5)
    prompt, group, new = 9, 5, 7
    shared = torch.randint(0, tiny64.model.cfg.vocab_size, (1, prompt), generator=generator).expand(group, -1)
    ids = torch.cat([shared, torch.randint(0, tiny64.model.cfg.vocab_size, (group, new), generator=generator)], 1)
    weights = torch.randn(group, new, generator=generator, dtype=torch.float64)
    full, fast = model(ids, prompt), model.score(ids, prompt)
    assert fast.shape == (group, new)
    assert torch.allclose(fast, full, rtol=0, atol=1e-12)
    grads_full = torch.autograd.grad((full * weights).sum(), list(model.parameters()))
    grads_fast = torch.autograd.grad((fast * weights).sum(), list(model.parameters()))
    for a, b in zip(grads_full, grads_fast, strict=True):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-13)
    one_token = ids[:, :prompt + 1]
    assert torch.allclose(model.score(one_token, prompt), model(one_token, prompt), rtol=0, atol=1e-12)
    other = ids.clone()
    other[1, 0] = (other[0, 0] + 1) % tiny64.model.cfg.vocab_size
    with pytest.raises(ValueError, match="shared"):
        model.score(other, prompt)
