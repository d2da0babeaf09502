"""The real model's R1-Zero run (app/kinds/smollm/engine/r1_zero_run.py) on the tiny GGUF (smollm_tiny_gguf.py),
so no checkpoint is needed:

- an independent loop in float64 (a plain copy of the model as the policy, another as the reference,
  log-probs by log-softmax of the full logits over the sampling temperature (TRL's convention), advantages, k3 and DeepSeekMath's per-sequence mean written
  out, plain AdamW) reaches the same numbers at every step: rewards, KL to the reference, loss, ‖∂loss/∂θ‖;
- step 0's KL is 0 (the policy starts as the reference), no clip fires (ρ = 1), a step of tied rewards
  has every advantage 0; the same params give the same run, another seed another one; bounds are refused.
"""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from pydantic import ValidationError
from smollm_tiny_gguf import write_tiny_gguf
from torch.nn import functional as F  # noqa: N812

from app.engine.lm.sampling import torch_threads
from app.kinds.smollm.domain.tasks import RewardPart, Task
from app.kinds.smollm.engine import checkpoint
from app.kinds.smollm.engine.prompts import prompt_ids
from app.kinds.smollm.engine.r1_zero_run import run_r1_zero
from app.kinds.smollm.engine.run_params import SmolRunParams
from app.kinds.smollm.engine.run_task import path_job, path_params, run_params, steps_for

# rewards a random model's byte soup earns sometimes, so most groups' rewards differ
FAKE_TASKS = (
    Task("has-e", "Say hello.", "e", (
        RewardPart("accuracy", lambda text: float("e" in text), "1 when the reply holds an 'e'."),
        RewardPart("brevity", lambda text: 0.5 * (len(text) % 3 == 0), "0.5 when its length is a multiple of 3."))),
    Task("has-a", "Say a word.", "a", (
        RewardPart("accuracy", lambda text: float("a" in text), "1 when the reply holds an 'a'."),)),
)
SMALL = {"steps": 4, "group_size": 6, "max_new_tokens": 8, "learning_rate": 1e-3, "seed": 5}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMOLLM_GGUF", str(path))
        return checkpoint.load(tmp_path_factory.mktemp("smollm-data"))


def run(loaded, **overrides):
    return run_r1_zero(SmolRunParams(**{**SMALL, **overrides}), loaded, tasks=FAKE_TASKS)


def plain_logp(model, ids, prompt_length, temperature):
    """log π of each completion token: log-softmax of the full logits / T at the position before it."""
    logits = model(ids[:, :-1])
    logp = F.log_softmax(logits.double() / temperature, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return logp[:, prompt_length - 1:].to(logits.dtype)


def independent_run(loaded, params: SmolRunParams):
    """The R1-Zero loop written out; returns per step (rewards, kl mean, loss, grad norm)."""
    policy, reference = copy.deepcopy(loaded.model), copy.deepcopy(loaded.model)
    reference.requires_grad_(False)
    optimiser = torch.optim.AdamW(policy.parameters(), lr=params.learning_rate, weight_decay=0.0)
    eos, pad = loaded.special_ids.eos, loaded.special_ids.pad
    out = []
    for s in range(params.steps):
        task = FAKE_TASKS[s % len(FAKE_TASKS)]
        prompt = prompt_ids(loaded, task)  # the chat-formatted prompt (tested in test_smollm_text.py)
        ids = torch.tensor([prompt] * params.group_size)
        generator = torch.Generator().manual_seed(params.seed + s)
        with torch_threads(1):  # as the engine samples: one thread, the same draw
            new_ids, new_mask = policy.generate(ids, torch.ones_like(ids), params.max_new_tokens, params.temperature,
                                                generator, eos_id=eos, pad_id=pad)
        ids = torch.cat([ids, new_ids], dim=1)
        mask = new_mask.to(torch.float32)
        texts = [loaded.tokenizer.decode([t for t, m in zip(row, keep, strict=True) if m], skip_special_tokens=True)
                 for row, keep in zip(new_ids.tolist(), new_mask.tolist(), strict=True)]
        rewards = torch.tensor([task.reward(t) for t in texts], dtype=torch.float64)
        with torch.no_grad():
            logp_ref = plain_logp(reference, ids, len(prompt), params.temperature).double()
        optimiser.zero_grad(set_to_none=True)
        logp = plain_logp(policy, ids, len(prompt), params.temperature).double()
        m = mask.double()
        advantages = (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-4)
        kl = (torch.exp(logp_ref - logp) - (logp_ref - logp) - 1) * m  # k3
        ratio = torch.exp(logp - logp.detach())  # 1, with the gradient of log π
        per_token = (ratio * advantages[:, None] - 0.04 * kl) * m  # the clip is inactive at ρ = 1
        loss = -((per_token.sum(-1) / m.sum(-1).clamp(min=1)).mean())
        loss.backward()
        grad_norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in policy.parameters())))
        optimiser.step()
        out.append((rewards.tolist(), float(kl.detach().sum() / m.sum()), float(loss.detach()), grad_norm))
    return out


def test_every_step_equals_an_independent_loop(tiny):
    params = SmolRunParams(**SMALL)
    result = run_r1_zero(params, tiny, tasks=FAKE_TASKS)
    expected = independent_run(tiny, params)
    assert [p.task_name for p in result.points] == ["has-e", "has-a", "has-e", "has-a"]
    assert sum(not p.tied for p in result.points) >= 2, "the fixture should give groups whose rewards differ"
    for point, (rewards, kl, loss, grad_norm) in zip(result.points, expected, strict=True):
        assert [a.reward for a in point.answers] == pytest.approx(rewards, abs=1e-12)
        assert point.reward_mean == pytest.approx(sum(rewards) / len(rewards), abs=1e-12)
        assert point.kl_mean == pytest.approx(kl, rel=1e-4, abs=1e-7)
        assert point.loss == pytest.approx(loss, rel=1e-4, abs=1e-6)
        assert point.grad_norm == pytest.approx(grad_norm, rel=1e-3)
    assert result.points[0].kl_mean == pytest.approx(0.0, abs=1e-7), "the policy starts as the reference"
    assert result.points[-1].kl_mean > 1e-6, "after AdamW steps at lr 1e-3 the policy has moved"


def test_what_each_step_logs(tiny):
    result = run(tiny)
    for p in result.points:
        assert p.clip_share == 0.0, "π_old is the policy that sampled: ρ = 1, nothing clips"
        assert p.length_mean == pytest.approx(sum(a.length for a in p.answers) / len(p.answers))
        assert p.stopped_share == sum(a.stopped for a in p.answers) / len(p.answers)
        assert set(p.part_means) == {part.name for part in FAKE_TASKS[p.step % 2].parts}
        if p.tied:
            assert all(a.advantage == 0.0 for a in p.answers)
        else:
            assert sum(a.advantage for a in p.answers) == pytest.approx(0.0, abs=1e-5)


def test_the_same_params_give_the_same_run_and_another_seed_another(tiny):
    first, again, other = run(tiny, steps=2), run(tiny, steps=2), run(tiny, steps=2, seed=6)
    assert dataclasses.replace(first, seconds=0, points=()) == dataclasses.replace(again, seconds=0, points=())
    assert [dataclasses.replace(p, seconds=0) for p in first.points] == \
           [dataclasses.replace(p, seconds=0) for p in again.points]
    assert [a.text for a in other.points[0].answers] != [a.text for a in first.points[0].answers]


@pytest.mark.parametrize(("field", "value"), [("steps", 0), ("steps", 201), ("group_size", 1), ("group_size", 17),
                                              ("max_new_tokens", 65), ("temperature", 0.0), ("learning_rate", 0)])
def test_bounds_are_refused_by_name(field, value):
    with pytest.raises(ValidationError) as caught:
        SmolRunParams(**{field: value})
    assert caught.value.errors()[0]["loc"] == (field,)


def test_job_params_name_the_path_and_follow_the_scale():
    assert steps_for(1.0) == 20 and steps_for(0.05) == 1 and steps_for(5.0) == 100
    params = run_params(3, 0.5)
    assert (params.seed, params.steps, params.max_length) == (3, 10, params.max_new_tokens)
    assert path_params("r1-zero", params, "cpu").run.steps == 10
    assert path_job("r1-zero", params, "cpu").params["run"]["steps"] == 10  # as stored
    with pytest.raises(KeyError):
        path_params("r1", params, "cpu")
