"""ε and β of the shown update only (step_clip_epsilon, step_beta; GRPOParams.shown_conventions): the
history is replayed with clip_epsilon and beta, so the group, π_old, π_ref and every ratio are the
default request's exactly, while the shown update's objective is an independent float64 computation
(tests/grpo_reference.py) with the new ε or β on those very ratios. The old parameters still change the
whole history: both exist on purpose (the figure's sliders send the first, the full form the second)."""
from __future__ import annotations

import math

import grpo_reference as ref
import pytest
import torch
from pydantic import ValidationError

from app.kinds.toy.engine.compare import compare_step
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import run_grpo_step

TOL = 1e-12
SAME = ("action", "reward", "logp", "logp_old", "logp_ref", "ratio", "advantage", "divergence")


def step(**kw):
    return run_grpo_step.__wrapped__(GRPOParams(**kw), "cpu")  # uncached: computed here


def col(result, name: str) -> torch.Tensor:
    return torch.tensor([float(s[name]) for s in result.samples], dtype=torch.float64)


def node(result, node_id: str) -> torch.Tensor:
    return torch.tensor(result.nodes[node_id].values, dtype=torch.float64)


def same_group(a, b) -> None:
    for name in SAME:
        assert torch.equal(col(a, name), col(b, name)), name
    for node_id in ("old_policy", "reference_policy", "policy", "ratio", "advantages"):
        assert torch.equal(node(a, node_id), node(b, node_id)), node_id


def reference(result, **conventions):
    c = {**result.params.conventions().model_dump(), **conventions}
    return ref.grpo_loss(col(result, "logp").tolist(), col(result, "logp_old").tolist(),
                         col(result, "logp_ref").tolist(), col(result, "reward").tolist(),
                         **ref.conventions_kwargs(c))


def close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=TOL, abs_tol=TOL)


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_step_eps_keeps_the_group_and_moves_only_the_band(eps):
    base, moved = step(), step(step_clip_epsilon=eps)
    same_group(base, moved)
    assert (moved.conventions.clip_epsilon, moved.conventions.clip_epsilon_high) == (eps, eps)  # ε_high follows
    assert (moved.params.clip_epsilon, moved.params.clip_epsilon_high) == (0.2, 0.2)  # the history's
    loss, rows = reference(base, clip_epsilon=eps, clip_epsilon_high=eps)
    for name in ("clipped", "objective"):
        got = col(moved, name).tolist()
        assert all(close(g, w[name]) for g, w in zip(got, rows, strict=True)), (name, got)
    assert [s["clip_active"] for s in moved.samples] == [r["clip_active"] for r in rows]
    assert close(moved.loss, loss)
    grads = ref.ratio_grads(rows)
    assert all(close(s["ratio_grad"], g) for s, g in zip(moved.samples, grads, strict=True))
    if eps == 0.1:  # the band now cuts the answers ε = 0.2 left inside: the lesson of the clip step
        assert sum(s["clip_active"] for s in moved.samples) > sum(s["clip_active"] for s in base.samples)
    print(f"step_clip_epsilon={eps}: ratios {sorted(set(round(s['ratio'], 4) for s in moved.samples))}, "
          f"clip-active {sum(s['clip_active'] for s in moved.samples)}/{len(moved.samples)} "
          f"(ε=0.2: {sum(s['clip_active'] for s in base.samples)}), loss {moved.loss:.6f} vs {base.loss:.6f}")


def test_clip_epsilon_still_changes_the_history():
    """The full form's clip_epsilon replays every earlier update with it: at the defaults ε = 0.3 makes the
    policy answer 2 every time, so the group and every ratio differ."""
    base, history = step(), step(clip_epsilon=0.3)
    assert not torch.equal(col(base, "ratio"), col(history, "ratio"))
    assert [s["action"] for s in history.samples] == [2] * 8
    assert [s["action"] for s in base.samples] != [2] * 8


@pytest.mark.parametrize("beta", [0.0, 0.3])
def test_step_beta_keeps_the_group_and_scales_only_the_kl_part(beta):
    base, moved = step(), step(step_beta=beta)
    same_group(base, moved)
    assert moved.conventions.beta == beta and moved.params.beta == 0.04
    loss, rows = reference(base, beta=beta)
    assert all(close(s["objective"], r["objective"]) for s, r in zip(moved.samples, rows, strict=True))
    assert torch.equal(col(moved, "clipped"), col(base, "clipped"))  # the surrogate is β's no more than before
    assert close(moved.loss, loss)
    # the KL part of ∂loss/∂log π scales with β; the surrogate part does not move
    assert torch.equal(col(moved, "grad_surrogate"), col(base, "grad_surrogate"))
    for s, b in zip(moved.samples, base.samples, strict=True):
        assert close(s["grad_kl"], b["grad_kl"] * beta / 0.04)
    assert not torch.equal(col(base, "objective"), col(step(beta=0.3), "objective"))


def test_eps_high_set_apart_stays_at_the_shown_update():
    """ε_high follows step_clip_epsilon only where it follows ε; set by the URL or a preset (DAPO), it stays."""
    assert step(clip_epsilon_high=0.28, step_clip_epsilon=0.1).conventions.clip_epsilon_high == 0.28
    dapo = step(preset="dapo", step_clip_epsilon=0.1)
    assert (dapo.conventions.clip_epsilon, dapo.conventions.clip_epsilon_high) == (0.1, 0.28)
    same_group(step(preset="dapo"), dapo)


def test_the_override_is_canonical_and_bounded():
    assert GRPOParams(step_clip_epsilon=0.2).step_clip_epsilon is None  # the history's own value: no override
    assert GRPOParams(step_beta=0.04) == GRPOParams()
    assert GRPOParams(clip_epsilon=0.3, step_clip_epsilon=0.3).url_overrides() == {"clip_epsilon": 0.3}
    assert GRPOParams(step_clip_epsilon=0.3, step_beta=0.1).url_overrides() == {"step_clip_epsilon": 0.3,
                                                                                 "step_beta": 0.1}
    for bad in ({"step_clip_epsilon": 1}, {"step_clip_epsilon": 0}, {"step_beta": -0.1}, {"step_beta": 11}):
        with pytest.raises(ValidationError):
            GRPOParams(**bad)
    # cached apart: the cache key is the params, and these are fields
    assert run_grpo_step(GRPOParams(step_clip_epsilon=0.3), "cpu").conventions.clip_epsilon == 0.3
    assert run_grpo_step(GRPOParams(), "cpu").conventions.clip_epsilon == 0.2


def test_compare_side_a_is_the_shown_update():
    """Compare's A is the step as the page shows it (with step_clip_epsilon); B re-scores the same group."""
    params = GRPOParams(step_clip_epsilon=0.1)
    c = compare_step.__wrapped__(params, GRPOParams(preset="trl").conventions(), "cpu")
    shown = step(step_clip_epsilon=0.1)
    assert col(c.a, "clipped").tolist() == col(shown, "clipped").tolist()
    assert c.a.conventions.clip_epsilon == 0.1 and c.b.conventions.clip_epsilon == 0.2
    assert torch.equal(col(c.b, "ratio"), col(shown, "ratio"))


def test_the_api_names_the_shown_update(make_client):
    client = make_client()
    body = client.get("/api/walkthroughs/toy_grpo/step?step=clip&step_clip_epsilon=0.3&step_beta=0.1").json()
    assert body["shown_update"] == {"clip_epsilon": 0.3, "clip_epsilon_high": 0.3, "beta": 0.1}
    assert body["params"]["clip_epsilon"] == 0.2 and body["params"]["step_clip_epsilon"] == 0.3
    default = client.get("/api/walkthroughs/toy_grpo/step?step=clip").json()
    assert default["shown_update"] == {"clip_epsilon": 0.2, "clip_epsilon_high": 0.2, "beta": 0.04}
    assert [s["ratio"] for s in body["samples"]] == [s["ratio"] for s in default["samples"]]
    assert client.get("/api/walkthroughs/toy_grpo/step?step_clip_epsilon=1").status_code == 422
