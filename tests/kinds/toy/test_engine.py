"""The torch engine against an independent float64 computation (tests/grpo_reference.py)."""
import copy
import math
from concurrent.futures import ThreadPoolExecutor

import grpo_reference as ref
import pytest
import torch
from pydantic import ValidationError

from app.domain.snapshot import load_snapshot
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.model import ToyConfig, ToyGRPO
from app.kinds.toy.engine.node_map import RUNNABLE_NODE_IDS
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import TrainingDiverged, run_grpo_step

SEED_FILE = "walkthroughs/toy_grpo.tensorviz.json"
TOL = 1e-12


def uncached(params):
    return run_grpo_step.__wrapped__(params, "cpu")


@pytest.fixture(scope="module")
def default_run():
    return uncached(GRPOParams())


# Varied runs for the formula checks: mixed override rewards, big steps, small eps.
VARIED = [
    {},
    {"seed": 3, "learning_rate": 0.8, "clip_epsilon": 0.1},
    {"seed": 1, "rewards": "1,0,0.5,0,2,0,1,-1", "learning_rate": 2.0},
    {"seed": 11, "group_size": 16, "iteration": 5, "inner_step": 3, "prompt": 3},
    {"rewards": "1,1,1,1", "beta": 0.001},
]


@pytest.fixture(scope="module", params=VARIED, ids=lambda q: ",".join(f"{k}={v}" for k, v in q.items()) or "defaults")
def any_run(request):
    return uncached(GRPOParams(**request.param))


def test_varied_runs_include_active_clips_on_both_sides():
    runs = [uncached(GRPOParams(**q)) for q in VARIED]
    signs = {(s["advantage"] > 0) for r in runs for s in r.samples if s["clip_active"]}
    assert signs == {True, False}


def test_every_snapshot_node_has_a_recorded_tensor(default_run):
    snapshot = load_snapshot(__import__("pathlib").Path(SEED_FILE))
    node_ids = {n.node_id for n in snapshot.nodes}
    assert node_ids == set(RUNNABLE_NODE_IDS)
    missing = [n for n in node_ids if n not in default_run.nodes]
    assert missing == []
    for node_id, record in default_run.nodes.items():
        assert record.values is not None, node_id
        assert list(record.shape) == list(torch.tensor(record.values).shape), node_id


def test_shapes_are_traced_not_declared(default_run):
    g = default_run.params.group_size
    assert default_run.nodes["input"].shape == (1, 3)  # the file declares 1,3,224,224
    assert default_run.nodes["policy.logits"].shape == (1, 4)
    assert default_run.nodes["advantages"].shape == (g,)
    assert default_run.nodes["output"].shape == ()


def test_defaults_show_every_phenomenon(default_run):
    samples = default_run.samples
    rewards = {s["reward"] for s in samples}
    assert len(rewards) > 1, "rewards must differ inside the group"
    assert any(abs(s["advantage"]) > 0.1 for s in samples)
    assert any(abs(s["ratio"] - 1) > 0.05 for s in samples), "policy must have moved from the old policy"
    active = [s for s in samples if s["clip_active"]]
    assert active, "at least one clip-active sample"
    assert all(s["ratio_grad"] == 0.0 for s in active)
    assert any(not s["clip_active"] and s["ratio_grad"] != 0 for s in samples)
    assert all(s["divergence"] > 0 for s in samples), "policy must differ from the reference"


def test_samples_match_independent_formulas(any_run):
    default_run = any_run
    p = default_run.params
    s = default_run.samples
    # log-probabilities: recompute log-softmax of the recorded logits in plain Python
    for prefix, key in (("policy", "logp"), ("old_policy", "logp_old"), ("reference_policy", "logp_ref")):
        logits = default_run.nodes[f"{prefix}.logits"].values[0]
        lps = ref.log_softmax(logits)
        assert default_run.nodes[f"{prefix}.log_probabilities"].values[0] == pytest.approx(lps, abs=TOL)
        assert [row[key] for row in s] == pytest.approx([lps[row["action"]] for row in s], abs=TOL)
    loss, rows = ref.grpo_loss([r["logp"] for r in s], [r["logp_old"] for r in s], [r["logp_ref"] for r in s],
                               [r["reward"] for r in s], p.clip_epsilon, p.beta, p.advantage_epsilon)
    for got, want in zip(s, rows, strict=True):
        for key in ("advantage", "ratio", "clipped", "divergence", "objective"):
            assert got[key] == pytest.approx(want[key], abs=TOL), key
        active = (want["advantage"] > 0 and want["ratio"] > 1 + p.clip_epsilon) or \
                 (want["advantage"] < 0 and want["ratio"] < 1 - p.clip_epsilon)
        assert got["clip_active"] == active
    assert default_run.loss == pytest.approx(loss, abs=TOL)
    assert default_run.objective == pytest.approx(-loss, abs=TOL)
    assert default_run.nodes["output"].values == pytest.approx(loss, abs=TOL)
    assert default_run.nodes["sub@ToyGRPO#0"].values == pytest.approx([r["objective"] for r in rows], abs=TOL)


def test_node_gradients_match_analytic_values(any_run):
    default_run = any_run
    p, s = default_run.params, default_run.samples
    g = p.group_size
    nodes = default_run.nodes
    assert nodes["output"].grad == 1.0
    assert nodes["sub@ToyGRPO#0"].grad == pytest.approx([-1 / g] * g, abs=TOL)
    assert nodes["clipped"].grad == pytest.approx([-1 / g] * g, abs=TOL)
    assert nodes["divergence"].grad == pytest.approx([p.beta / g] * g, abs=TOL)
    # d loss / d rho_i = -A_i / G unless the clip is active, then exactly 0
    for row, grad in zip(s, nodes["ratio"].grad, strict=True):
        assert grad == (0.0 if row["clip_active"] else pytest.approx(-row["advantage"] / g, abs=TOL))
    assert nodes["python@ratio#0"].grad == nodes["ratio"].grad
    for frozen in ("old_policy", "old_policy.logits", "reference_policy.log_probabilities", "advantages"):
        assert nodes[frozen].grad is None and nodes[frozen].no_grad_reason


def test_parameter_gradients_match_finite_differences(any_run):
    default_run = any_run
    p, s = default_run.params, default_run.samples
    weight = default_run.parameter_grads["policy.logits.weight"]["values"]
    bias = default_run.parameter_grads["policy.logits.bias"]["values"]
    x = list(TOY_PROMPTS[p.prompt].features)
    args = (x, [r["action"] for r in s], [r["logp_old"] for r in s], [r["logp_ref"] for r in s],
            [r["reward"] for r in s], p.clip_epsilon, p.beta, p.advantage_epsilon)
    h = 1e-6
    for name, tensor in (("weight", weight), ("bias", bias)):
        recorded = default_run.parameter_grads[f"policy.logits.{name}"]["grad"]
        flat_idx = [(i, j) for i in range(len(tensor)) for j in range(len(tensor[0]))] if name == "weight" \
            else [(i, None) for i in range(len(tensor))]
        for i, j in flat_idx:
            def loss_at(delta, i=i, j=j):
                w, b = copy.deepcopy(weight), list(bias)
                if j is None:
                    b[i] += delta
                else:
                    w[i][j] += delta
                return ref.policy_loss(w, b, *args)
            numeric = (loss_at(h) - loss_at(-h)) / (2 * h)
            got = recorded[i] if j is None else recorded[i][j]
            assert got == pytest.approx(numeric, abs=1e-7), (name, i, j)


def test_gradcheck_of_the_model_in_float64():
    torch.manual_seed(0)  # only this test's local inputs; the engine never uses the global RNG
    model = ToyGRPO(ToyConfig()).double()
    with torch.no_grad():
        model.old_policy.logits.weight.add_(0.3)
        model.reference_policy.logits.bias.sub_(0.2)
    x = torch.tensor([[0.5, -0.2, 0.8]], dtype=torch.float64)
    actions = torch.tensor([0, 1, 2, 3, 1])
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0], dtype=torch.float64)
    weight = model.policy.logits.weight

    def loss_of(w):
        original = weight.data.clone()
        out = torch.func.functional_call(model.policy.logits, {"weight": w, "bias": model.policy.logits.bias}, (x,))
        logp = torch.log_softmax(out, dim=1)[0, actions]
        logp_old = model.old_policy(x)[0, actions]
        logp_ref = model.reference_policy(x)[0, actions]
        adv = model.advantages(rewards)
        per = model.clipped(model.ratio(logp, logp_old), adv) - model.cfg.beta * model.divergence(logp, logp_ref)
        assert torch.equal(weight.data, original)
        return -per.mean()

    assert torch.autograd.gradcheck(loss_of, (weight.detach().clone().requires_grad_(True),))


def test_equal_rewards_give_zero_advantages():
    run = uncached(GRPOParams(rewards="1,1,1,1"))
    assert run.params.group_size == 4
    assert [s["advantage"] for s in run.samples] == [0.0, 0.0, 0.0, 0.0]
    assert [abs(s["ratio_grad"]) for s in run.samples] == [0.0] * 4
    # only the reference penalty can move the policy now
    assert any(v != 0 for row in run.parameter_grads["policy.logits.weight"]["grad"] for v in row)


def test_first_update_of_first_iteration_is_the_dull_case():
    run = uncached(GRPOParams(iteration=0, inner_step=0))
    assert all(s["ratio"] == 1.0 and s["divergence"] == 0.0 for s in run.samples)


def test_bessel_free_std_is_used():
    run = uncached(GRPOParams(rewards="1,0,0,0", advantage_epsilon=1e-12))
    # population std of (1,0,0,0) is sqrt(3)/4, so A_0 = 0.75 / (sqrt(3)/4) = sqrt(3)
    assert run.samples[0]["advantage"] == pytest.approx(math.sqrt(3), rel=1e-9)


def test_deterministic_across_runs_and_threads():
    params = [GRPOParams(seed=s) for s in range(12)]
    alone = [uncached(p) for p in params]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(uncached, params * 3))
    for i, run in enumerate(together):
        assert run.samples == alone[i % 12].samples
        assert run.nodes == alone[i % 12].nodes


def test_seed_changes_sampling_only():
    a, b = uncached(GRPOParams(seed=1)), uncached(GRPOParams(seed=2))
    assert [s["action"] for s in a.samples] != [s["action"] for s in b.samples]
    assert a.nodes["reference_policy.logits"].values == b.nodes["reference_policy.logits"].values


def test_cache_returns_identical_result():
    p = GRPOParams(seed=3)
    assert run_grpo_step(p, "cpu") is run_grpo_step(GRPOParams(seed=3), "cpu")


@pytest.mark.parametrize("bad, field", [
    ({"group_size": 1}, "group_size"), ({"group_size": 5000}, "group_size"),
    ({"clip_epsilon": 0}, "clip_epsilon"), ({"clip_epsilon": 1.0}, "clip_epsilon"),
    ({"clip_epsilon": float("nan")}, "clip_epsilon"), ({"beta": -0.1}, "beta"),
    ({"beta": float("inf")}, "beta"), ({"advantage_epsilon": -1e-4}, "advantage_epsilon"),
    ({"learning_rate": float("nan")}, "learning_rate"), ({"iteration": 51}, "iteration"),
    ({"seed": -1}, "seed"), ({"rewards": "1,x"}, "rewards"), ({"rewards": "1,nan"}, "rewards"),
    ({"group_size": 8, "rewards": "1,0"}, "rewards"), ({"inner_step": 4, "inner_steps": 4}, "inner_step"),
    ({"prompt": len(TOY_PROMPTS)}, "prompt"), ({"unknown": 1}, "unknown"),
])
def test_invalid_parameters_are_refused(bad, field):
    with pytest.raises(ValidationError) as info:
        GRPOParams(**bad)
    assert field in str(info.value)


def test_divergent_history_is_refused_not_crashed():
    with pytest.raises(TrainingDiverged, match="learning_rate"):
        uncached(GRPOParams(learning_rate=10, beta=10, iteration=50, inner_steps=16))
