"""Every GRPO convention of the engine against the independent float64 reference (tests/grpo_reference.py).

Random requests (every convention field, every preset, seed, G, history, reward overrides) run through
`run_grpo_step`; every recorded number must equal the reference's to 1e-12 relative to the size of the
operands it came from, and the policy's parameter gradients must equal central finite differences of the
reference loss to 1e-6 relative.
"""
import math

import grpo_reference as ref
import pytest
from hypothesis import HealthCheck, assume, example, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from pydantic import ValidationError

from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.engine.grpo.presets import PRESET_NAMES, PRESETS
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.compare import compare_step, grad_change
from app.kinds.toy.engine.grpo_step import TrainingDiverged, run_grpo_step
from app.kinds.toy.engine.params import GRPOParams

REL = 1e-12  # engine vs reference, relative to the operands' size
FD_STEP = 1e-6
FD_REL = 1e-6  # parameter gradients vs central finite differences
# Roundoff of a central difference: a few ulps of the summed loss terms, divided by 2h.
FD_NOISE = 1e-9
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OPTIONAL = ("dual_clip", "log_ratio_clamp", "kl_clamp")

# What each preset must fill, transcribed from the sources named in app/engine/presets.py.
EXPECTED_PRESETS = {
    "deepseekmath": dict(advantage_std="population", advantage_epsilon=1e-4, clip_epsilon=0.2,
                         clip_epsilon_high=0.2, dual_clip=None, beta=0.04, kl_estimator="k3",
                         kl_placement="loss", kl_bias_correction=False, log_ratio_clamp=None, kl_clamp=None,
                         loss_aggregation="sample_mean", max_length=1),
    "trl": dict(advantage_std="sample", advantage_epsilon=1e-4, clip_epsilon=0.2, clip_epsilon_high=0.2,
                dual_clip=None, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=True,
                log_ratio_clamp=None, kl_clamp=None, loss_aggregation="token_mean", max_length=1),
    "verl": dict(advantage_std="sample", advantage_epsilon=1e-6, clip_epsilon=0.2, clip_epsilon_high=0.2,
                 dual_clip=3.0, beta=0.001, kl_estimator="k3", kl_placement="loss", kl_bias_correction=False,
                 log_ratio_clamp=20.0, kl_clamp=10.0, loss_aggregation="token_mean", max_length=1),
    "dr_grpo": dict(advantage_std="none", advantage_epsilon=1e-4, clip_epsilon=0.2, clip_epsilon_high=0.2,
                    dual_clip=None, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=False,
                    log_ratio_clamp=None, kl_clamp=None, loss_aggregation="token_sum_norm", max_length=1),
    "dapo": dict(advantage_std="sample", advantage_epsilon=1e-6, clip_epsilon=0.2, clip_epsilon_high=0.28,
                 dual_clip=10.0, beta=0.0, kl_estimator="k3", kl_placement="loss", kl_bias_correction=False,
                 log_ratio_clamp=20.0, kl_clamp=None, loss_aggregation="token_mean", max_length=1),
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
}


@st.composite
def convention_fields(draw):
    """A random set of explicitly given conventions (the rest from the preset), always valid."""
    fields = draw(st.fixed_dictionaries({}, optional=CONVENTION_VALUES))
    if fields.get("kl_placement") == "reward":
        fields["kl_bias_correction"] = False  # the one invalid pair (trl's preset turns it on)
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
               c is not None and abs(ratio - c) <= REL * ratio]
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
    size = scales(s, rows, kw)
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
        elif name in OPTIONAL and given_value in (None, "none"):
            want = None
        else:
            want = given_value
        assert getattr(c, name) == want, name
    if "clip_epsilon_high" in fields:
        assert c.clip_epsilon_high == fields["clip_epsilon_high"]
    elif fields.get("preset") == "dapo":
        assert c.clip_epsilon_high == 0.28  # DAPO's clip-higher is named, so it does not follow
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
