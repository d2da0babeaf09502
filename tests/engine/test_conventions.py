"""Every GRPO convention of the engine against the independent float64 reference (tests/grpo_reference.py).

Random requests (every convention field, every preset, seed, G, history, reward overrides) run through
`run_grpo_step`; every recorded number must equal the reference's to 1e-12 relative to the size of the
operands it came from, and the policy's parameter gradients must equal central finite differences of the
reference loss to 1e-6 relative.
"""
import math

import grpo_reference as ref
import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from pydantic import ValidationError

from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.engine.grpo.presets import PRESET_NAMES, PRESETS
from app.engine.grpo.token_step import token_grpo_step
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.compare import compare_step, grad_change
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import TrainingDiverged, run_grpo_step

REL = 1e-12  # engine vs reference, relative to the operands' size
FD_STEP = 1e-6
FD_REL = 1e-6  # parameter gradients vs central finite differences
# Roundoff of a central difference: a few ulps of the summed loss terms, divided by 2h.
FD_NOISE = 1e-9
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OPTIONAL = ("dual_clip", "log_ratio_clamp", "kl_clamp")  # verl's numbers, which "none" turns off
OPTIONAL_IS = ("is_clip_min", "is_clip_max")  # the IS correction's bounds, "none" turns them off too
# the 2026 conventions (issue 23), as every preset but gspo and cispo leaves them
OFF_2026 = dict(policy_loss="clip", importance_sampling_level="token", is_correction="none", is_clip_min=None,
                is_clip_max=3.0)

# What each preset must fill, transcribed from the sources named in app/engine/presets.py.
EXPECTED_PRESETS = {
    "deepseekmath": dict(advantage_std="population", advantage_epsilon=1e-4, clip_epsilon=0.2,
                         clip_epsilon_high=0.2, dual_clip=None, beta=0.04, kl_estimator="k3",
                         kl_placement="loss", kl_bias_correction=False, log_ratio_clamp=None, kl_clamp=None,
                         loss_aggregation="sample_mean", max_length=1, **OFF_2026),
    "trl": dict(advantage_std="sample", advantage_epsilon=1e-4, clip_epsilon=0.2, clip_epsilon_high=0.2,
                dual_clip=None, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=True,
                log_ratio_clamp=None, kl_clamp=None, loss_aggregation="token_mean", max_length=1, **OFF_2026),
    "verl": dict(advantage_std="sample", advantage_epsilon=1e-6, clip_epsilon=0.2, clip_epsilon_high=0.2,
                 dual_clip=3.0, beta=0.001, kl_estimator="k3", kl_placement="loss", kl_bias_correction=False,
                 log_ratio_clamp=20.0, kl_clamp=10.0, loss_aggregation="token_mean", max_length=1, **OFF_2026),
    "dr_grpo": dict(advantage_std="none", advantage_epsilon=1e-4, clip_epsilon=0.2, clip_epsilon_high=0.2,
                    dual_clip=None, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=False,
                    log_ratio_clamp=None, kl_clamp=None, loss_aggregation="token_sum_norm", max_length=1, **OFF_2026),
    "dapo": dict(advantage_std="sample", advantage_epsilon=1e-6, clip_epsilon=0.2, clip_epsilon_high=0.28,
                 dual_clip=10.0, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=False,
                 log_ratio_clamp=20.0, kl_clamp=None, loss_aggregation="token_mean", max_length=1, **OFF_2026),
    # TRL 1.16 docs/source/paper_index.md, GSPO: sequence level, loss_type grpo, beta 0, epsilon 3e-4 / 4e-4
    "gspo": dict(advantage_std="sample", advantage_epsilon=1e-4, clip_epsilon=3e-4, clip_epsilon_high=4e-4,
                 dual_clip=None, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=True,
                 log_ratio_clamp=None, kl_clamp=None, loss_aggregation="sample_mean", max_length=1,
                 **{**OFF_2026, "importance_sampling_level": "sequence"}),
    # TRL 1.16 grpo_config.py: loss_type="cispo" (token mean), epsilon_high 5.0 recommended
    "cispo": dict(advantage_std="sample", advantage_epsilon=1e-4, clip_epsilon=0.2, clip_epsilon_high=5.0,
                  dual_clip=None, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=True,
                  log_ratio_clamp=None, kl_clamp=None, loss_aggregation="token_mean", max_length=1,
                  **{**OFF_2026, "policy_loss": "cispo"}),
}


def uncached(params):
    return run_grpo_step.__wrapped__(params, "cpu")


def compared(params, conventions_b):
    if currently_in_test_context():
        note(f"request: {params.url_overrides()}, side B: {conventions_b!r}")
    return compare_step.__wrapped__(params, conventions_b, "cpu")


# ---------------------------------------------------------------------------------------------- strategies

def _off_or(values):
    return st.one_of(st.just("none"), values)


CONVENTION_VALUES = {
    "preset": st.sampled_from(PRESET_NAMES),
    "advantage_std": st.sampled_from(["population", "sample", "none"]),
    "advantage_epsilon": st.one_of(st.sampled_from([1e-6, 1e-4, 1e-2, 1.0]), st.floats(1e-8, 1)),
    "clip_epsilon": st.floats(0.01, 0.95),
    "clip_epsilon_high": st.one_of(st.sampled_from([0.28, 10.0]), st.floats(0.01, 10)),
    # The toy's ratios of A < 0 samples rarely pass 1.2: small c make the dual clip bite.
    "dual_clip": _off_or(st.one_of(st.sampled_from([3.0, 10.0, 1.01]), st.floats(1.001, 1.2), st.floats(1.001, 20))),
    "beta": st.one_of(st.sampled_from([0.0, 0.001, 0.04]), st.floats(0, 0.5)),
    "kl_estimator": st.sampled_from(["k1", "k2", "k3"]),
    "kl_placement": st.sampled_from(["loss", "reward"]),
    "kl_bias_correction": st.booleans(),
    # Small bounds make the clamps bite on the toy's log-ratios (|log ρ| ~ 0.01..1).
    "log_ratio_clamp": _off_or(st.one_of(st.just(20.0), st.floats(0.005, 0.3), st.floats(0.005, 2))),
    "kl_clamp": _off_or(st.one_of(st.just(10.0), st.floats(1e-6, 0.01), st.floats(1e-4, 1))),
    "loss_aggregation": st.sampled_from(["sample_mean", "token_mean", "token_sum_norm"]),
    "max_length": st.one_of(st.just(1), st.integers(1, 4096)),
    "policy_loss": st.sampled_from(["clip", "cispo"]),
    "importance_sampling_level": st.sampled_from(["token", "sequence"]),
    "is_correction": st.sampled_from(["none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]),
    "is_clip_min": _off_or(st.floats(0, 1)),
    "is_clip_max": _off_or(st.floats(1.01, 10)),
}


@st.composite
def convention_fields(draw):
    """A random set of explicitly given conventions (the rest from the preset), always valid."""
    fields = draw(st.fixed_dictionaries({}, optional=CONVENTION_VALUES))
    if fields.get("kl_placement") == "reward":
        fields["kl_bias_correction"] = False  # the one invalid pair (trl's preset turns it on)
    if fields.get("is_clip_min") in (None, "none") and fields.get("is_clip_max") == "none":
        fields["is_clip_min"] = 0.5  # a *_truncate correction needs one bound (TRL refuses none)
    if "max_length" not in fields and draw(st.booleans()):
        fields["max_length"] = draw(st.integers(2, 64))  # token_sum_norm's constant, more often than not
    return fields


REWARD_VALUES = st.one_of(st.sampled_from([0.0, 1.0, 0.5, -1.0, 2.0, 0.1, 0.3, -0.7]),
                          st.floats(-5, 5, allow_subnormal=False))


@st.composite
def run_fields(draw):
    """The request's other fields: seed, G, learning rate, history, prompt, reward override."""
    g = draw(st.integers(2, 12))
    inner_steps = draw(st.integers(1, 4))
    fields = {
        "seed": draw(st.integers(0, 2**31 - 1)), "group_size": g,
        "learning_rate": draw(st.one_of(st.just(0.3), st.floats(0.01, 1.5))),
        "iteration": draw(st.integers(0, 3)), "inner_steps": inner_steps,
        "inner_step": draw(st.integers(0, inner_steps - 1)), "prompt": draw(st.integers(0, len(TOY_PROMPTS) - 1)),
    }
    kind = draw(st.sampled_from(["accuracy", "mixed", "equal"]))
    if kind == "mixed":
        fields["rewards"] = tuple(draw(st.lists(REWARD_VALUES, min_size=g, max_size=g)))
    elif kind == "equal":
        fields["rewards"] = (draw(REWARD_VALUES),) * g
    return fields


@st.composite
def step_params(draw):
    return GRPOParams(**draw(run_fields()), **draw(convention_fields()))


def run_or_reject(params):
    """A run, or the example rejected when the history's updates diverge (big steps, big beta)."""
    note(f"request: {params.url_overrides()}")  # hypothesis prints pydantic models blank
    try:
        return uncached(params)
    except TrainingDiverged:
        assume(False)


# ------------------------------------------------------------------------------------------ the reference

def column(samples, key):
    return [s[key] for s in samples]


def reference(samples, conventions):
    """(loss, rows, kwargs) of the reference for the recorded group under these conventions."""
    kw = ref.conventions_kwargs(conventions.model_dump())
    loss, rows = ref.grpo_loss(column(samples, "logp"), column(samples, "logp_old"), column(samples, "logp_ref"),
                               column(samples, "reward"), **kw)
    return loss, rows, kw


def kl_operand_scale(delta, estimator):
    """Size of the operands of the KL estimate (k3 = e^Δ - Δ - 1 cancels for small Δ)."""
    return {"k1": abs(delta), "k2": delta * delta, "k3": math.exp(delta) + abs(delta) + 1}[estimator]


def scales(samples, rows, kw):
    """Per quantity, the size of the operands it is computed from: the engine and the reference may
    differ by a few ulps of these (e.g. A = (r - mean)/(std + eps) inherits the rounding of mean(r))."""
    beta, reward_kl = kw["beta"], kw["kl_placement"] == "reward"
    r_scale = [abs(s["reward"]) + (beta * abs(row["divergence"]) if reward_kl else 0.0)
               for s, row in zip(samples, rows, strict=True)]
    r_used = column(rows, "reward_used")
    denominator = 1.0 if kw["advantage_std"] == "none" else ref.std(r_used, kw["advantage_std"]) + kw["adv_eps"]
    a_scale = max(max(abs(row["advantage"]) for row in rows), max(r_scale) / denominator)
    high = kw["clip_high"]
    out = []
    for s, row in zip(samples, rows, strict=True):
        lp = s["logp_old"] if reward_kl else s["logp"]
        delta = s["logp_ref"] - lp
        if kw["log_ratio_clamp"] is not None:
            delta = ref.clip(delta, -kw["log_ratio_clamp"], kw["log_ratio_clamp"])
        kl = max(kl_operand_scale(delta, kw["kl_estimator"]), abs(row["divergence"]))
        kl_term = 0.0 if reward_kl else kl * (row["ratio"] if kw["kl_bias_correction"] else 1.0)
        if kw["policy_loss"] == "cispo":  # sg(min(ρ, ε_high))·A·log π
            clipped = max(abs(row["clipped"]), min(row["ratio"], high) * a_scale * abs(s["logp"]))
        else:
            clipped = max(abs(row["clipped"]), max(row["ratio"], 1 + high, kw["dual_clip"] or 0.0) * a_scale)
        out.append({
            "reward_used": abs(s["reward"]) + beta * kl if reward_kl else abs(s["reward"]),
            "advantage": a_scale, "ratio": abs(row["ratio"]), "clipped": clipped,
            "divergence": kl, "kl_used": kl * (row["ratio"] if kw["kl_bias_correction"] else 1.0),
            "objective": clipped + beta * kl_term, "weight": row["weight"],
            "ratio_grad": row["weight"] * (a_scale + beta * kl),
        })
    return out


def close(got, want, scale):
    return abs(got - want) <= REL * max(abs(want), scale)


VALUE_KEYS = ("reward_used", "advantage", "ratio", "clipped", "divergence", "kl_used", "objective", "weight")


def check_step(run, conventions):
    """Every recorded number of `run` against the reference under `conventions`. Returns the worst
    |engine - reference| / tolerance seen (<= 1 passes)."""
    s, nodes = run.samples, run.nodes
    # log-probabilities: log-softmax of the recorded logits, in plain Python
    for prefix, key in (("policy", "logp"), ("old_policy", "logp_old"), ("reference_policy", "logp_ref")):
        lps = ref.log_softmax(nodes[f"{prefix}.logits"].values[0])
        assert column(s, key) == pytest.approx([lps[row["action"]] for row in s], rel=REL, abs=REL)
    loss, rows, kw = reference(s, conventions)
    size = scales(s, rows, kw)
    worst = 0.0
    for i, (got, want, sc) in enumerate(zip(s, rows, size, strict=True)):
        for key in VALUE_KEYS:
            assert close(got[key], want[key], sc[key]), (i, key, got[key], want[key], sc[key])
            worst = max(worst, abs(got[key] - want[key]) / (REL * max(abs(want[key]), sc[key]) or 1))
        if kw["kl_bias_correction"]:
            assert got["kl_rho_factor"] == got["ratio"]
        else:
            assert got["kl_rho_factor"] is None
        grad = ref.ratio_grads([want])[0]
        assert close(got["ratio_grad"], grad, sc["ratio_grad"]), (i, "ratio_grad", got["ratio_grad"], grad)
        check_flags(got, want, kw, sc["advantage"], sc["divergence"])
    loss_scale = math.fsum(sc["weight"] * sc["objective"] for sc in size)
    assert close(run.loss, loss, loss_scale), (run.loss, loss, loss_scale)
    worst = max(worst, abs(run.loss - loss) / (REL * max(abs(loss), loss_scale) or 1))
    assert run.objective == -run.loss
    check_nodes(run, kw)
    return worst


def check_flags(got, want, kw, a_scale, kl_scale):
    """Flags equal the reference's, except exactly on a boundary, where one ulp decides them."""
    ratio = want["ratio"]
    low, high, c = 1 - kw["clip_eps"], 1 + kw["clip_high"], kw["dual_clip"]
    on_edge = [abs(ratio - low) <= REL * ratio, abs(ratio - high) <= REL * ratio,
               c is not None and abs(ratio - c) <= REL * ratio,
               abs(ratio - kw["clip_high"]) <= REL * ratio]  # cispo's cap
    if any(on_edge):
        assume(False)
    for key in ("ratio_clamped", "kl_log_ratio_clamped"):
        assert got[key] == want[key], key  # the same subtraction on the same floats
    if kw["kl_clamp"] is not None:
        if abs(abs(want["kl_unclamped"]) - kw["kl_clamp"]) <= REL * kl_scale:
            assume(False)
    assert got["kl_clamped"] == want["kl_clamped"]
    # The band and the dual clip act by the sign of A; an A within rounding of 0 has no sign.
    if abs(want["advantage"]) > REL * a_scale:
        assert got["clip_active"] == want["clip_active"], "clip_active"
        assert got["dual_clip_hit"] == want["dual_clip_hit"], "dual_clip_hit"
    assert not (got["clip_active"] and got["dual_clip_hit"])


def check_nodes(run, kw):
    """The graph's nodes hold the samples' numbers; d loss/d node is what the aggregation says."""
    s, nodes = run.samples, run.nodes
    for node_id, key in (("advantages", "advantage"), ("ratio", "ratio"), ("clipped", "clipped"),
                         ("divergence", "divergence"), ("sub@ToyGRPO#0", "objective")):
        assert nodes[node_id].values == column(s, key), node_id
    assert nodes["output"].values == run.loss and nodes["output"].grad == 1.0
    w = column(s, "weight")
    assert nodes["sub@ToyGRPO#0"].grad == pytest.approx([-v for v in w], rel=REL)
    assert nodes["clipped"].grad == pytest.approx([-v for v in w], rel=REL)
    if nodes["ratio"].grad is None:  # cispo without KL x rho: rho is only a stopped weight
        assert kw["policy_loss"] == "cispo" and "stop-gradient" in nodes["ratio"].no_grad_reason
        assert column(s, "ratio_grad") == [0.0] * len(s)
    else:
        assert nodes["ratio"].grad == column(s, "ratio_grad")
    if kw["kl_placement"] == "reward":
        assert nodes["divergence"].grad is None and nodes["divergence"].no_grad_reason
    else:
        rho = column(s, "ratio") if kw["kl_bias_correction"] else [1.0] * len(s)
        want = [kw["beta"] * wi * r for wi, r in zip(w, rho, strict=True)]
        assert nodes["divergence"].grad == pytest.approx(want, rel=REL, abs=0.0)


def check_parameter_gradients(run, conventions):
    """parameter_grads against central differences of the reference loss in the policy's weight and bias.
    Points where any clip/clamp boundary lies within the step are rejected, not tolerated."""
    p, s = run.params, run.samples
    x = list(TOY_PROMPTS[p.prompt].features)
    weight = run.parameter_grads["policy.logits.weight"]["values"]
    bias = run.parameter_grads["policy.logits.bias"]["values"]
    kw = ref.conventions_kwargs(conventions.model_dump())
    args = (x, column(s, "action"), column(s, "logp_old"), column(s, "logp_ref"), column(s, "reward"))

    def at(i, j, delta):
        w, b = [list(row) for row in weight], list(bias)
        if j is None:
            b[i] += delta
        else:
            w[i][j] += delta
        return ref.policy_rows(w, b, *args, **kw)

    base_loss, base_rows = ref.policy_rows(weight, bias, *args, **kw)
    if kw["policy_loss"] == "cispo":  # the capped ratio is a constant (stop-gradient): hold it in the differences
        kw = {**kw, "cispo_frozen": [row["cispo_weight"] for row in base_rows]}
    branches = [row["branches"] for row in base_rows]
    coords = [(i, j) for i in range(len(weight)) for j in range(len(x))] + [(i, None) for i in range(len(bias))]
    numeric, analytic, truncation = [], [], []
    for i, j in coords:
        differences = []
        for step in (FD_STEP, 2 * FD_STEP):
            (plus, rows_plus), (minus, rows_minus) = at(i, j, step), at(i, j, -step)
            if not [r["branches"] for r in rows_plus] == branches == [r["branches"] for r in rows_minus]:
                assume(False)  # a clip or clamp boundary lies within the step
            differences.append((plus - minus) / (2 * step))
        numeric.append(differences[0])
        # Richardson: the O(h²) truncation error of the step-h difference is ~(D(2h) - D(h))/3.
        truncation.append(abs(differences[1] - differences[0]))
        grads = run.parameter_grads["policy.logits." + ("bias" if j is None else "weight")]["grad"]
        analytic.append(grads[i] if j is None else grads[i][j])
    _, rows, _ = reference(s, conventions)
    size = scales(s, rows, {k: v for k, v in kw.items() if k != "cispo_frozen"})
    x_scale = 2 * (1 + sum(map(abs, x)))  # |d logp / d parameter| <= 2|x_j| (1 for the bias)
    loss_terms = math.fsum(r["weight"] * sc["objective"] for r, sc in zip(base_rows, size, strict=True))
    # The advantages' own rounding (see scales) moves each d logp term by up to REL·scale(A)·ρ.
    a_noise = REL * x_scale * math.fsum(r["weight"] * sc["clipped"] for r, sc in zip(rows, size, strict=True))
    # This side's log-softmax may differ from the engine's by ulps (δ): the reference is differentiated
    # δ away from the engine's point, so the two derivatives differ by up to |d² loss / d logp²|·δ.
    logits = run.nodes["policy.logits"].values[0]
    delta = 8e-16 * (1 + max(map(abs, logits)) + max(abs(v) for v in column(s, "logp")))
    curvature = math.fsum(r["weight"] * (sc["clipped"] + kw["beta"] * (1 + r["ratio"]) ** 2 * (sc["divergence"] + 1))
                          for r, sc in zip(rows, size, strict=True))
    tol = FD_REL * max(map(abs, numeric)) + FD_NOISE * loss_terms + a_noise + x_scale * curvature * delta
    worst = 0.0
    for (i, j), got, want, trunc in zip(coords, analytic, numeric, truncation, strict=True):
        assert abs(got - want) <= tol + trunc, f"{(i, j)} engine {got!r} finite difference {want!r} tol {tol + trunc!r} at {p.url_overrides()}"
        worst = max(worst, abs(got - want) / (tol + trunc) if tol + trunc else 0.0)
    return worst


# ------------------------------------------------------------------------------------- engine vs reference

@SETTINGS
@given(params=step_params())
@example(params=GRPOParams())
@example(params=GRPOParams(preset="verl", beta=0.5, log_ratio_clamp=0.05, kl_clamp=0.001, seed=3, learning_rate=0.8))
@example(params=GRPOParams(preset="trl", beta=0.3, seed=1, rewards="1,0,0.5,0,2,0,1,-1", learning_rate=1.0))
@example(params=GRPOParams(preset="dapo", dual_clip=1.05, seed=3, learning_rate=1.5, clip_epsilon=0.05))
@example(params=GRPOParams(preset="dr_grpo", beta=0.2, kl_estimator="k1", kl_placement="reward", max_length=7))
@example(params=GRPOParams(kl_estimator="k2", kl_placement="reward", beta=0.5, advantage_std="sample", rewards="1,1,1,1"))
def test_step_matches_reference(params):
    run = run_or_reject(params)
    check_step(run, params.conventions())


@SETTINGS
@given(params=step_params())
@example(params=GRPOParams())
@example(params=GRPOParams(preset="trl", beta=0.3, seed=1, rewards="1,0,0.5,0,2,0,1,-1", learning_rate=1.0))
@example(params=GRPOParams(preset="verl", beta=0.5, kl_estimator="k2", kl_clamp=0.01, log_ratio_clamp=0.3))
def test_parameter_gradients_match_finite_differences(params):
    run = run_or_reject(params)
    check_parameter_gradients(run, params.conventions())


# Fixed requests that, together, make every flag fire (random ones hit the dual clip rarely).
PHENOMENA = [
    {"seed": 2, "beta": 0.3, "learning_rate": 0.8, "iteration": 3, "inner_step": 3, "dual_clip": 1.01},
    {"seed": 0, "learning_rate": 0.8, "inner_step": 3, "dual_clip": 1.05, "log_ratio_clamp": 0.1, "kl_clamp": 0.002},
    {"seed": 3, "learning_rate": 0.8, "clip_epsilon": 0.1, "kl_estimator": "k1", "kl_clamp": 0.01},
    {"seed": 1, "rewards": "1,0,0.5,0,2,0,1,-1", "learning_rate": 1.5, "preset": "dapo", "dual_clip": 1.01},
    {"seed": 11, "group_size": 12, "iteration": 3, "inner_step": 3, "prompt": 3, "preset": "verl", "beta": 0.2,
     "kl_placement": "reward", "log_ratio_clamp": 0.05, "kl_clamp": 0.01},
    {"seed": 5, "preset": "trl", "beta": 0.1, "kl_estimator": "k2", "learning_rate": 1.0},
    {"seed": 7, "preset": "dr_grpo", "beta": 0.05, "max_length": 16, "kl_placement": "reward", "kl_estimator": "k1"},
] + [{"preset": name} for name in PRESET_NAMES]
FLAGS = ("clip_active", "dual_clip_hit", "ratio_clamped", "kl_log_ratio_clamped", "kl_clamped")


def test_fixed_requests_fire_every_flag():
    fired = {(f, s["advantage"] > 0) for q in PHENOMENA for s in uncached(GRPOParams(**q)).samples for f in FLAGS
             if s[f]}
    assert {f for f, _ in fired} == set(FLAGS)
    assert {("clip_active", True), ("clip_active", False), ("dual_clip_hit", False)} <= fired


@pytest.mark.parametrize("query", PHENOMENA, ids=lambda q: ",".join(f"{k}={v}" for k, v in q.items()))
def test_fixed_requests_match_reference(query):
    params = GRPOParams(**query)
    run = uncached(params)
    check_step(run, params.conventions())
    check_parameter_gradients(run, params.conventions())


# ------------------------------------------------------------------------------------------- presets

@pytest.mark.parametrize("name", PRESET_NAMES)
def test_each_preset_fills_its_documented_values(name):
    filled = Conventions(preset=name).model_dump()
    assert filled == {"preset": name, **EXPECTED_PRESETS[name]}
    assert {k: filled[k] for k in PRESETS[name]} == dict(PRESETS[name])  # exactly what presets.py names
    assert GRPOParams(preset=name).conventions() == Conventions(preset=name)


def test_presets_are_the_documented_set():
    assert set(PRESET_NAMES) == set(PRESETS) == set(EXPECTED_PRESETS)
    assert Conventions() == Conventions(preset="deepseekmath")


@settings(max_examples=150, deadline=None)
@given(fields=convention_fields(), explicit_none=st.lists(st.sampled_from(OPTIONAL), unique=True))
def test_explicit_fields_override_the_preset(fields, explicit_none):
    for name in explicit_none:  # an explicit None (a dump's) is off, like "none"
        fields.setdefault(name, None)
    c = Conventions(**fields)
    preset = EXPECTED_PRESETS[fields.get("preset", "deepseekmath")]
    for name in CONVENTION_FIELDS:
        if name in ("preset", "clip_epsilon_high"):
            continue
        given_value = fields.get(name)
        if name not in fields:
            want = preset[name]
        elif name in OPTIONAL + OPTIONAL_IS and given_value in (None, "none"):
            want = None
        else:
            want = given_value
        assert getattr(c, name) == want, name
    if "clip_epsilon_high" in fields:
        assert c.clip_epsilon_high == fields["clip_epsilon_high"]
    elif fields.get("preset") in ("dapo", "gspo", "cispo"):
        # DAPO's clip-higher, GSPO's 4e-4 and CISPO's cap are named, so they do not follow
        assert c.clip_epsilon_high == PRESETS[fields["preset"]]["clip_epsilon_high"]
    else:
        assert c.clip_epsilon_high == c.clip_epsilon  # follows e_low, given or not


@pytest.mark.parametrize("off", ["none", "None", " NONE "])
@pytest.mark.parametrize("name", OPTIONAL)
def test_none_turns_off_a_presets_number(name, off):
    assert PRESETS["verl"][name] is not None
    assert getattr(Conventions(preset="verl", **{name: off}), name) is None
    assert getattr(GRPOParams(preset="verl", **{name: off}), name) is None
    assert getattr(Conventions(preset="verl", **{name: None}), name) is None  # a dump's None: off too
    assert getattr(Conventions(preset="verl", **{name: ""}), name) == PRESETS["verl"][name]  # blank: not given


def test_blank_or_none_for_a_required_convention_means_not_given():
    assert Conventions(preset="trl", beta=None, advantage_std="").model_dump() == Conventions(preset="trl").model_dump()


@pytest.mark.parametrize("preset, clip, high, want", [
    ("deepseekmath", 0.3, None, 0.3), ("verl", 0.1, None, 0.1), ("dapo", 0.3, None, 0.28),
    ("dapo", 0.3, 0.5, 0.5), ("trl", 0.3, 0.2, 0.2), ("deepseekmath", None, 0.4, 0.4),
])
def test_clip_epsilon_high_follows_unless_named(preset, clip, high, want):
    c = Conventions(preset=preset, clip_epsilon=clip, clip_epsilon_high=high)
    assert c.clip_epsilon_high == want
    assert c.clip_epsilon == (0.2 if clip is None else clip)


def _url_value(v):
    return "none" if v is None else v


@settings(max_examples=150, deadline=None)
@given(run=run_fields(), conventions=convention_fields(), drop_group_size=st.booleans())
def test_url_overrides_round_trip(run, conventions, drop_group_size):
    if drop_group_size and "rewards" in run:
        del run["group_size"]  # G from the rewards' count
    p = GRPOParams(**run, **conventions)
    overrides = p.url_overrides()
    assert GRPOParams(**{k: _url_value(v) for k, v in overrides.items()}) == p
    assert GRPOParams(**overrides) == p  # an explicit None of an optional number is off, like "none"
    # ... through a URL's strings too
    as_text = {k: "none" if v is None else ",".join(map(repr, v)) if isinstance(v, tuple)
               else str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)
               for k, v in overrides.items()}
    assert GRPOParams(**as_text) == p
    # and nothing in it is redundant (G is repeated next to the rewards, by design)
    for name in overrides:
        if name == "group_size" and p.rewards is not None:
            continue
        try:
            rebuilt = GRPOParams(**{k: _url_value(v) for k, v in overrides.items() if k != name})
        except ValidationError:
            continue  # e.g. inner_step no longer below the default inner_steps
        assert rebuilt != p, name


def test_defaults_have_no_url_overrides():
    assert GRPOParams().url_overrides() == {}
    assert GRPOParams(preset="verl").url_overrides() == {"preset": "verl"}
    assert GRPOParams(preset="verl", dual_clip="none").url_overrides() == {"preset": "verl", "dual_clip": None}
    assert GRPOParams(preset="dapo", clip_epsilon=0.3).url_overrides() == {"preset": "dapo", "clip_epsilon": 0.3}


@pytest.mark.parametrize("bad, field", [
    ({"kl_bias_correction": True, "kl_placement": "reward"}, "kl_bias_correction"),
    ({"preset": "trl", "kl_placement": "reward"}, "kl_bias_correction"),  # trl's own bias correction
    ({"dual_clip": 1}, "dual_clip"), ({"dual_clip": 1.0}, "dual_clip"), ({"dual_clip": 0.5}, "dual_clip"),
    ({"dual_clip": -3}, "dual_clip"), ({"dual_clip": "nan"}, "dual_clip"),
    ({"preset": "grpo"}, "preset"), ({"preset": "TRL"}, "preset"), ({"preset": 3}, "preset"),
    ({"clip_epsilon_high": 0}, "clip_epsilon_high"), ({"clip_epsilon_high": -0.1}, "clip_epsilon_high"),
    ({"clip_epsilon_high": 10.5}, "clip_epsilon_high"),
    ({"advantage_std": "bessel"}, "advantage_std"), ({"kl_estimator": "k4"}, "kl_estimator"),
    ({"kl_placement": "advantage"}, "kl_placement"), ({"loss_aggregation": "sum"}, "loss_aggregation"),
    ({"max_length": 0}, "max_length"), ({"log_ratio_clamp": 0}, "log_ratio_clamp"), ({"kl_clamp": -1}, "kl_clamp"),
])
@pytest.mark.parametrize("model", [Conventions, GRPOParams])
def test_invalid_conventions_are_refused(model, bad, field):
    with pytest.raises(ValidationError) as info:
        model(**bad)
    assert field in {str(part) for error in info.value.errors() for part in error["loc"]}, info.value


# --------------------------------------------------------------------------------------------- known facts

def _other(c, **changes):
    return Conventions(**{**c.model_dump(), **changes})


@settings(max_examples=40, deadline=None)
@given(run=run_fields(), conventions=convention_fields())
def test_aggregations_agree_for_one_token_completions(run, conventions):
    conventions["max_length"] = 1
    params = GRPOParams(**run, **conventions)
    for mode in ("sample_mean", "token_mean", "token_sum_norm"):
        try:
            cmp = compared(params, _other(params.conventions(), loss_aggregation=mode))
        except TrainingDiverged:
            assume(False)
        a, b = cmp.a, cmp.b
        assert column(b.samples, "weight") == [1 / params.group_size] * params.group_size
        assert b.loss == pytest.approx(a.loss, rel=REL, abs=1e-300)
        for name, grads in a.parameter_grads.items():
            assert _flat(b.parameter_grads[name]["grad"]) == pytest.approx(_flat(grads["grad"]), rel=REL, abs=1e-300), name


@settings(max_examples=40, deadline=None)
@given(run=run_fields(), conventions=convention_fields())
def test_sample_std_scales_advantages_by_sqrt_g_minus_1_over_g(run, conventions):
    params = GRPOParams(**run, **{**conventions, "advantage_std": "population"})
    try:
        cmp = compared(params, _other(params.conventions(), advantage_std="sample"))
    except TrainingDiverged:
        assume(False)
    g, eps = params.group_size, params.advantage_epsilon
    r_used = column(cmp.a.samples, "reward_used")
    assert column(cmp.b.samples, "reward_used") == r_used
    sigma_s = ref.std(r_used, "sample")
    factor = math.sqrt((g - 1) / g)
    for pop, samp in zip(column(cmp.a.samples, "advantage"), column(cmp.b.samples, "advantage"), strict=True):
        assert (pop > 0) == (samp > 0) and (pop < 0) == (samp < 0)  # never a sign
        if abs(pop) > 1e-9:
            # A_s/A_p = (σ_p + ε)/(σ_s + ε), which lies in [sqrt((G-1)/G), sqrt((G-1)/G) + ε/σ_s]
            upper = factor + eps / sigma_s + REL if sigma_s > 0 else math.inf
            assert factor - REL <= samp / pop <= upper, (samp / pop, factor)


def test_sample_std_exactly_without_epsilon_effect():
    a = uncached(GRPOParams(rewards="1,0,0,0", advantage_epsilon=1e-300))
    b = uncached(GRPOParams(rewards="1,0,0,0", advantage_epsilon=1e-300, advantage_std="sample"))
    # population std of (1,0,0,0) is sqrt(3)/4, sample std is 1/2
    assert a.samples[0]["advantage"] == pytest.approx(math.sqrt(3), rel=REL)
    assert b.samples[0]["advantage"] == pytest.approx(1.5, rel=REL)
    assert b.samples[0]["advantage"] / a.samples[0]["advantage"] == pytest.approx(math.sqrt(3 / 4), rel=REL)
    none = uncached(GRPOParams(rewards="1,0,0,0", advantage_std="none", advantage_epsilon=0.5))
    assert column(none.samples, "advantage") == [0.75, -0.25, -0.25, -0.25]  # centred only, eps unused


def _zero_grads(run):
    return all(v == 0.0 for grads in run.parameter_grads.values() for row in grads["grad"]
               for v in (row if isinstance(row, list) else [row]))


# Values whose sum and mean are exact in binary floating point: the group mean is the value itself.
DYADIC = st.integers(-64, 64).map(lambda k: k / 8)


@settings(max_examples=60, deadline=None)
@given(run=run_fields(), conventions=convention_fields(), value=DYADIC)
def test_equal_rewards_give_zero_loss_and_gradient_without_kl(run, conventions, value):
    run["rewards"] = (value,) * run["group_size"]
    params = GRPOParams(**run, **{**conventions, "beta": 0.0})
    step = run_or_reject(params)
    assert column(step.samples, "advantage") == [0.0] * params.group_size
    assert step.loss == 0.0
    assert _zero_grads(step)


@pytest.mark.parametrize("rewards, eps, std", [
    ("0.1,0.1,0.1", 1e-4, "population"), ("0.1,0.1,0.1", 1e-300, "population"),
    ("0.7,0.7,0.7", 1e-12, "sample"), ("0.1,0.1,0.1,0.1,0.1,0.1", 1e-6, "none"),
    ("123.456,123.456,123.456,123.456,123.456", 1e-4, "population"),
])
def test_equal_rewards_of_any_value_give_exactly_zero_advantages(rewards, eps, std):
    step = uncached(GRPOParams(rewards=rewards, advantage_epsilon=eps, advantage_std=std, beta=0.0))
    assert column(step.samples, "advantage") == [0.0] * step.params.group_size
    assert step.loss == 0.0 and _zero_grads(step)


@settings(max_examples=40, deadline=None)
@given(run=run_fields(), value=DYADIC, estimator=st.sampled_from(["k1", "k2", "k3"]),
       beta=st.floats(0.001, 0.5), bias=st.booleans(), preset=st.sampled_from(PRESET_NAMES))
def test_equal_rewards_move_the_policy_only_through_the_kl(run, value, estimator, beta, bias, preset):
    run.update(rewards=(value,) * run["group_size"], iteration=max(run["iteration"], 1))
    params = GRPOParams(**run, preset=preset, beta=beta, kl_estimator=estimator, kl_bias_correction=bias,
                        kl_placement="loss", log_ratio_clamp="none", kl_clamp="none")
    step = run_or_reject(params)
    # (the history's own groups may all have equal accuracy rewards too, leaving the policy at the reference)
    assume(step.nodes["policy.logits"].values != step.nodes["reference_policy.logits"].values)
    assert column(step.samples, "advantage") == [0.0] * params.group_size
    assert all(v == 0.0 for v in column(step.samples, "clipped"))
    assert not _zero_grads(step), f"{params.url_overrides()}"  # the policy left the reference in earlier iterations
    check_parameter_gradients(step, params.conventions())


@pytest.mark.parametrize("estimator, moves", [("k1", True), ("k2", False), ("k3", False)])
@pytest.mark.parametrize("inner_step", [0, 1, 3])
def test_equal_rewards_in_the_first_iteration(estimator, moves, inner_step):
    """At the reference k2 and k3 have zero gradient, so with A = 0 the policy never leaves it;
    k1 = log π - log π_ref has the score function's gradient even there."""
    step = uncached(GRPOParams(rewards="1,1,1,1,1", iteration=0, inner_steps=4, inner_step=inner_step,
                               kl_estimator=estimator, beta=0.5))
    assert _zero_grads(step) is not moves
    if not moves:
        assert all(s["ratio"] == 1.0 and s["divergence"] == 0.0 for s in step.samples)


@settings(max_examples=40, deadline=None)
@given(run=run_fields(), beta=st.one_of(st.just(0.0), st.floats(0.001, 0.5)))
def test_trl_kl_term_is_k3_times_rho(run, beta):
    params = GRPOParams(**run, preset="trl", beta=beta)
    step = run_or_reject(params)
    for s in step.samples:
        rho = math.exp(s["logp"] - s["logp_old"])
        k3 = ref.k3(s["logp"], s["logp_ref"])
        scale = (math.exp(s["logp_ref"] - s["logp"]) + abs(s["logp_ref"] - s["logp"]) + 1) * rho
        assert close(s["kl_used"], k3 * rho, scale), (s["kl_used"], k3 * rho)
        assert s["kl_rho_factor"] == s["ratio"]
        assert close(s["clipped"] - s["objective"], beta * k3 * rho, beta * scale + abs(s["clipped"]))


# ------------------------------------------------------------------------------------------- compare_step

def _flat(values):
    if values is None:
        return []
    if isinstance(values, (int, float)):
        return [float(values)]
    return [v for item in values for v in _flat(item)]


def _norm(values):
    return math.sqrt(math.fsum(v * v for v in values))


@settings(max_examples=40, deadline=None)
@given(run=run_fields(), conventions=convention_fields(), conventions_b=convention_fields())
def test_compare_step_uses_side_a_samples_and_measures_grad_change(run, conventions, conventions_b):
    params = GRPOParams(**run, **conventions)
    b_conventions = Conventions(**conventions_b)
    try:
        cmp = compared(params, b_conventions)
    except TrainingDiverged:
        assume(False)
    a, b = cmp.a, cmp.b
    assert a.samples == uncached(params).samples
    for key in ("action", "reward", "logp", "logp_old", "logp_ref"):
        assert column(b.samples, key) == column(a.samples, key), key
    check_step(b, b_conventions)  # side B is computed with B's conventions
    grads = {n: (a.nodes[n].grad, b.nodes[n].grad) for n in a.nodes}
    grads.update({n: (g["grad"], b.parameter_grads[n]["grad"]) for n, g in a.parameter_grads.items()})
    assert set(cmp.grad_change) == set(grads)
    for name, (ga, gb) in grads.items():
        change = cmp.grad_change[name]
        if ga is None and gb is None:
            assert change is None, name
            continue
        fa, fb = _flat(ga), _flat(gb)
        fa, fb = fa or [0.0] * len(fb), fb or [0.0] * len(fa)
        diff = _norm([x - y for x, y in zip(fa, fb, strict=True)])
        assert change.norm_a == pytest.approx(_norm(fa), rel=REL) and change.norm_b == pytest.approx(_norm(fb), rel=REL)
        assert change.diff == pytest.approx(diff, rel=REL, abs=0.0), name
        if _norm(fa) > 0:
            assert change.relative == pytest.approx(diff / _norm(fa), rel=REL, abs=0.0), name
        else:
            assert change.relative == (0.0 if diff == 0 else None), name


def test_compare_step_labels_side_b_with_its_conventions():
    b_conventions = Conventions(preset="verl", dual_clip="none", kl_clamp="none")
    cmp = compared(GRPOParams(), b_conventions)
    assert cmp.conventions_b == b_conventions
    assert cmp.b.params.conventions() == b_conventions


@settings(max_examples=30, deadline=None)
@given(run=run_fields(), conventions=convention_fields())
def test_identical_conventions_change_nothing(run, conventions):
    params = GRPOParams(**run, **conventions)
    try:
        cmp = compared(params, params.conventions())
    except TrainingDiverged:
        assume(False)
    assert cmp.b.samples == cmp.a.samples and cmp.b.loss == cmp.a.loss
    assert cmp.b.parameter_grads == cmp.a.parameter_grads
    for name, change in cmp.grad_change.items():
        assert change is None or (change.relative == 0.0 and change.diff == 0.0), name
    assert all(cmp.grad_change[name] is not None for name in cmp.a.parameter_grads)


def test_grad_change_of_known_vectors():
    assert grad_change([3.0, 4.0], [0.0, 0.0]).relative == 1.0
    assert grad_change([[3.0], [4.0]], [[3.0], [4.0]]).relative == 0.0
    assert grad_change(None, [1.0]).relative is None  # nothing on side A: unbounded
    assert grad_change(None, None) is None
    assert grad_change(2.0, 1.0).relative == 0.5


# ------------------------------------------------------------- the 2026 conventions on ragged tokens (issue 23)
# GSPO's sequence-level ratio, CISPO, TRL's vLLM importance-sampling correction: token_grpo_step against
# plain-Python float64 hand computations (tests/grpo_reference.py token_loss), values and d loss / d logp
# per token (finite differences of the reference, the CISPO cap held constant as its stop-gradient says).

# completion i: [(log π, log π_old, log π_ref, log π_sampling)] per token; 1, 3, 5 and 2 tokens
RAGGED = [
    [(-0.9, -1.2, -1.0, -1.1)],
    [(-0.3, -0.5, -0.4, -2.2), (-2.0, -1.7, -1.9, -1.6), (-0.7, -1.1, -0.8, -1.0)],
    [(-1.5, -1.1, -1.3, -0.1), (-0.2, -0.6, -0.3, -0.5), (-1.0, -1.0, -1.1, -1.3), (-2.4, -2.0, -2.1, -2.6),
     (-0.4, -0.3, -0.5, -0.2)],
    [(-1.3, -0.9, -1.2, -1.0), (-0.6, -0.8, -0.5, -0.1)],
]
RAGGED_REWARDS = [1.0, 0.0, 1.0, 0.0]
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def ragged_tensors(rows=RAGGED):
    g, t = len(rows), max(len(r) for r in rows)
    out = torch.zeros(4, g, t, dtype=torch.float64)
    mask = torch.zeros(g, t, dtype=torch.float64)
    for i, row in enumerate(rows):
        for j, quad in enumerate(row):
            out[:, i, j] = torch.tensor(quad, dtype=torch.float64)
            mask[i, j] = 1.0
    return out[0].clone().requires_grad_(True), out[1], out[2], out[3], mask


def hand_loss(c: Conventions, rows=RAGGED, *, frozen=None, advantages=None):
    triples = [[q[:3] for q in row] for row in rows]
    sampling = [[q[3] for q in row] for row in rows]
    return ref.token_loss(triples, RAGGED_REWARDS, c.model_dump(), sampling=sampling, advantages_given=advantages,
                          cispo_frozen=frozen)


def hand_caps(c: Conventions, rows=RAGGED):
    """min(ρ, ε_high) per token: what CISPO's stop-gradient freezes."""
    caps = []
    for row in rows:
        if c.importance_sampling_level == "sequence":
            rho = [math.exp(math.fsum(q[0] - q[1] for q in row) / len(row))] * len(row)
        else:
            rho = [math.exp(q[0] - q[1]) for q in row]
        caps.append([min(r, c.clip_epsilon_high) for r in rho])
    return caps


def hand_gradient(c: Conventions, rows=RAGGED, h=1e-6, advantages=None):
    frozen = hand_caps(c, rows) if c.policy_loss == "cispo" else None
    grads = []
    for i, row in enumerate(rows):
        for t in range(len(row)):
            moved = []
            for delta in (h, -h):
                shifted = [list(map(list, r)) for r in rows]
                shifted[i][t][0] += delta
                moved.append(hand_loss(c, [[tuple(q) for q in r] for r in shifted], frozen=frozen,
                                       advantages=advantages))
            grads.append(((i, t), (moved[0] - moved[1]) / (2 * h)))
    return grads


def app_step(c: Conventions, *, sampling=True, advantages=None):
    logp, logp_old, logp_ref, logp_sampling, mask = ragged_tensors()
    step = token_grpo_step(logp, logp_old, logp_ref, torch.tensor(RAGGED_REWARDS, dtype=torch.float64), mask, c,
                           logp_sampling=logp_sampling if sampling else None, advantages=advantages)
    step.loss.backward()
    return step, logp.grad


NEW_CONVENTIONS = [
    dict(preset="gspo"), dict(preset="gspo", clip_epsilon=0.2), dict(preset="gspo", beta=0.04),
    dict(preset="trl", importance_sampling_level="sequence", beta=0.04, clip_epsilon=0.1),
    dict(preset="verl", importance_sampling_level="sequence", loss_aggregation="token_sum_norm", max_length=6),
    dict(preset="cispo"), dict(preset="cispo", clip_epsilon_high=1.2, beta=0.04),
    dict(preset="cispo", clip_epsilon_high=1.2, importance_sampling_level="sequence", loss_aggregation="sample_mean"),
    dict(preset="deepseekmath", policy_loss="cispo", clip_epsilon_high=1.3),
    *(dict(preset="trl", is_correction=m) for m in IS_MODES),
    *(dict(preset="trl", is_correction=m, is_clip_min=0.8, is_clip_max=1.5, beta=0.04) for m in IS_MODES),
    *(dict(preset="cispo", clip_epsilon_high=1.2, is_correction=m, is_clip_max=1.5) for m in IS_MODES),
    dict(preset="gspo", clip_epsilon=0.2, is_correction="sequence_mask", is_clip_min=0.5, is_clip_max="none"),
]


@pytest.mark.parametrize("fields", NEW_CONVENTIONS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_new_conventions_match_hand_computation(fields):
    c = Conventions(**fields)
    step, grad = app_step(c)
    want = hand_loss(c)
    assert math.isclose(float(step.loss.detach()), want, rel_tol=1e-12, abs_tol=1e-14), (float(step.loss.detach()), want)
    for (i, t), g in hand_gradient(c):
        assert math.isclose(float(grad[i, t]), g, rel_tol=1e-6, abs_tol=1e-9), ((i, t), float(grad[i, t]), g)
    assert float(grad[0, 1:].abs().sum()) == 0.0 and float(grad[3, 2:].abs().sum()) == 0.0  # padding


def test_gspo_ratio_is_the_geometric_mean_per_completion():
    c = Conventions(preset="gspo", clip_epsilon=0.5, clip_epsilon_high=0.5)  # a band wide enough: nothing clips
    step, grad = app_step(c)
    g = len(RAGGED)
    for i, row in enumerate(RAGGED):
        rho = math.exp(math.fsum(q[0] - q[1] for q in row) / len(row))  # (π/π_old)^(1/|o|)
        assert step.ratio[i, :len(row)].tolist() == pytest.approx([rho] * len(row), rel=1e-14)
        a = float(step.advantages[i])
        # loss = −(1/G) Σ_i ρ_i A_i (sample_mean of a value shared by the tokens): d/d logp_it = −A_i ρ_i / (G |o_i|)
        assert grad[i, :len(row)].tolist() == pytest.approx([-a * rho / (g * len(row))] * len(row), rel=1e-12)
    assert not step.clip_active.any()


def test_cispo_gradient_is_the_capped_ratio_times_the_advantage():
    c = Conventions(preset="cispo", clip_epsilon_high=1.2)
    step, grad = app_step(c)
    total = sum(len(r) for r in RAGGED)
    for i, row in enumerate(RAGGED):
        a = float(step.advantages[i])
        for t, q in enumerate(row):
            rho = math.exp(q[0] - q[1])
            assert float(grad[i, t]) == pytest.approx(-min(rho, 1.2) * a / total, rel=1e-12)  # token mean, β 0
            assert bool(step.clip_high[i, t]) == (rho > 1.2 and a > 0)  # TRL's cispo_clip_ratio
            assert float(step.surrogate[i, t].detach()) == pytest.approx(min(rho, 1.2) * a * q[0], rel=1e-12)
    assert step.clip_high.any() and not step.clip_low.any() and not step.dual_clip_hit.any()
    assert torch.equal(step.clip_active, step.clip_high)


def test_clip_flags_are_trls_low_and_high():
    c = Conventions(preset="trl", clip_epsilon=0.1, clip_epsilon_high=0.15)
    step, _ = app_step(c)
    for i, row in enumerate(RAGGED):
        a = float(step.advantages[i])
        for t, q in enumerate(row):
            rho = math.exp(q[0] - q[1])
            assert bool(step.clip_low[i, t]) == (rho < 0.9 and a < 0)
            assert bool(step.clip_high[i, t]) == (rho > 1.15 and a > 0)
    assert step.clip_low.any() and step.clip_high.any()
    assert torch.equal(step.clip_active, step.clip_low | step.clip_high)


@pytest.mark.parametrize("mode", IS_MODES)
def test_is_weights_by_hand(mode):
    c = Conventions(preset="trl", is_correction=mode, is_clip_min=0.8, is_clip_max=1.5)
    step, _ = app_step(c)
    hits = []
    for i, row in enumerate(RAGGED):
        diffs = [q[1] - q[3] for q in row]
        ratios = [math.exp(math.fsum(diffs))] * len(row) if mode.startswith("sequence") else [math.exp(d) for d in diffs]
        for t, r in enumerate(ratios):
            outside = r < 0.8 or r > 1.5
            want = min(max(r, 0.8), 1.5) if mode.endswith("truncate") else (0.0 if outside else r)
            assert float(step.is_weight[i, t]) == pytest.approx(want, rel=1e-14)
            assert bool(step.is_bound_hit[i, t]) == outside
            hits.append((r < 0.8, r > 1.5))
    assert any(lo for lo, _ in hits) and any(hi for _, hi in hits)  # both bounds bind somewhere
    assert float(step.is_weight[0, 1:].abs().sum()) == 0.0 and step.is_correction_skipped is None


def test_is_correction_without_sampling_logps_is_weight_one_and_says_so():
    c = Conventions(preset="trl", is_correction="token_truncate")
    step, grad = app_step(c, sampling=False)
    plain, plain_grad = app_step(Conventions(preset="trl"))
    _, _, _, _, mask = ragged_tensors()
    assert torch.equal(step.is_weight, mask) and not step.is_bound_hit.any()
    assert "logp_sampling" in step.is_correction_skipped
    assert float(step.loss.detach()) == float(plain.loss.detach()) and torch.equal(grad, plain_grad)
    assert plain.is_correction_skipped is None and torch.equal(plain.is_weight, mask)


def test_given_advantages_replace_the_rewards():
    c = Conventions(preset="trl", beta=0.04)
    given_a = torch.tensor([0.7, -1.3, 0.2, 0.4], dtype=torch.float64)
    step, grad = app_step(c, advantages=given_a)
    assert torch.equal(step.advantages, given_a)
    assert math.isclose(float(step.loss.detach()), hand_loss(c, advantages=given_a.tolist()), rel_tol=1e-12)
    for (i, t), g in hand_gradient(c, advantages=given_a.tolist()):
        assert math.isclose(float(grad[i, t]), g, rel_tol=1e-6, abs_tol=1e-9)


SWAPS = [  # (a convention, the one it must not be mistaken for)
    (dict(preset="trl", importance_sampling_level="sequence"), dict(preset="trl")),
    (dict(preset="gspo", clip_epsilon=0.2), dict(preset="gspo", clip_epsilon=0.2, importance_sampling_level="token")),
    (dict(preset="cispo", clip_epsilon_high=1.2), dict(preset="trl", clip_epsilon_high=0.2)),
    (dict(preset="cispo", clip_epsilon_high=1.2), dict(preset="cispo", clip_epsilon_high=2.2)),
    *((dict(preset="trl", is_correction=m), dict(preset="trl")) for m in IS_MODES),
    (dict(preset="trl", is_correction="token_truncate"), dict(preset="trl", is_correction="token_mask")),
    (dict(preset="trl", is_correction="sequence_truncate"), dict(preset="trl", is_correction="sequence_mask")),
    (dict(preset="trl", is_correction="token_mask"), dict(preset="trl", is_correction="sequence_mask")),
]


@pytest.mark.parametrize(("fields", "other"), SWAPS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_each_new_convention_changes_the_numbers(fields, other):
    """Swapping a new convention for its neighbour changes the loss or the per-token gradient far beyond
    rounding, so a test comparing numbers would catch the swap."""
    step, grad = app_step(Conventions(**fields))
    step_b, grad_b = app_step(Conventions(**other))
    assert abs(float(step.loss.detach()) - float(step_b.loss.detach())) > 1e-4 or float((grad - grad_b).abs().max()) > 1e-4


def test_new_conventions_keep_the_tiny_lm_modules_equal_to_token_grpo_step():
    """TinyLMGRPO composes the head's modules; token_grpo_step the functions: the same numbers."""
    from app.kinds.tiny_lm.engine.tiny_lm_grpo import TinyLMGRPO
    for fields in NEW_CONVENTIONS:
        c = Conventions(**fields)
        model = TinyLMGRPO(c)
        logp, logp_old, logp_ref, _, mask = ragged_tensors()
        ratio = model.ratio(logp, logp_old, *((mask,) if c.importance_sampling_level == "sequence" else ())) * mask
        adv = model.advantages(torch.tensor(RAGGED_REWARDS, dtype=torch.float64))
        surrogate = model.clipped(ratio, adv.unsqueeze(-1) * mask, *((logp,) if c.policy_loss == "cispo" else ()))
        step = token_grpo_step(logp, logp_old, logp_ref, torch.tensor(RAGGED_REWARDS, dtype=torch.float64), mask, c)
        assert torch.equal(ratio, step.ratio) and torch.equal(surrogate * mask, step.surrogate)


@pytest.mark.parametrize("mode", IS_MODES)
def test_the_toy_accepts_the_new_conventions(mode):
    """The toy's one-token step: sequence level is token level, cispo applies, and an IS correction has
    no rollout engine to correct for (weight 1, said in the history)."""
    base = uncached(GRPOParams(preset="trl", beta=0.04))
    seq = uncached(GRPOParams(preset="trl", beta=0.04, importance_sampling_level="sequence"))
    assert seq.samples == base.samples and seq.loss == base.loss
    corrected = uncached(GRPOParams(preset="trl", beta=0.04, is_correction=mode))
    assert corrected.samples == base.samples and "logp_sampling" in corrected.history["is_correction"]
    cispo = uncached(GRPOParams(preset="trl", beta=0.04, policy_loss="cispo", clip_epsilon_high=1.1))
    assert cispo.loss != base.loss


@pytest.mark.parametrize("bad, field", [
    ({"is_correction": "token_truncate", "is_clip_max": "none"}, "is_clip_max"),
    ({"is_clip_min": 3.0, "is_clip_max": 2.0}, "is_clip_max"), ({"is_clip_min": 2.0, "is_clip_max": 2.0}, "is_clip_max"),
    ({"is_clip_min": -0.1}, "is_clip_min"), ({"is_clip_max": 0}, "is_clip_max"),
    ({"is_correction": "vllm"}, "is_correction"), ({"policy_loss": "gspo"}, "policy_loss"),
    ({"importance_sampling_level": "sentence"}, "importance_sampling_level"),
])
def test_invalid_new_conventions_are_refused(bad, field):
    with pytest.raises(ValidationError) as info:
        Conventions(**bad)
    assert field in {str(part) for error in info.value.errors() for part in error["loc"]}, info.value


def test_new_fields_at_their_defaults_leave_urls_alone():
    assert GRPOParams(policy_loss="clip", importance_sampling_level="token", is_correction="none",
                      is_clip_max=3.0).url_overrides() == {}
    assert GRPOParams(preset="gspo").url_overrides() == {"preset": "gspo"}
    assert GRPOParams(is_clip_max="none").url_overrides() == {"is_clip_max": None}
    assert GRPOParams(is_correction="token_mask", is_clip_max="none", is_clip_min=0.5).conventions().is_clip_max is None
