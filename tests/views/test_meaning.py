"""app/views/meaning.py: names, formulas and sentences from the snapshot's data, and formulas
filled with a real run's recorded numbers (docs/design.md §3), never recomputed."""
import copy
import dataclasses
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from snapshots import SEED_PATH, other_snapshot, seed_dict

from app.domain.snapshot import load_snapshot, parse_snapshot
from app.kinds.toy.domain.toy_task import ROLE_LABELS, TOY_PROMPTS
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import run_grpo_step
from app.kinds.toy.views.meaning import choice_label, filled_formula
from app.views.meaning import NodeMeaning, node_meaning
from app.views.numbers import param, significant

SEED = load_snapshot(SEED_PATH)
MINUS = "−"
# The formulas the issue asks for, as docs/design.md §3 writes them.
REQUIRED = {
    "ratio": f"ρ_i = exp(log π_θ(o_i|q) {MINUS} log π_old(o_i|q))",
    "clipped": f"L_i = min(ρ_i·A_i, clip(ρ_i, 1{MINUS}ε, 1+ε)·A_i)",
    "divergence": f"D_i = exp(log π_ref {MINUS} log π_θ) {MINUS} (log π_ref {MINUS} log π_θ) {MINUS} 1",
    "advantages": f"A_i = (r_i {MINUS} mean(r)) / (std_pop(r) + ε_A)",
    "sub@ToyGRPO#0": f"L_i {MINUS} β·D_i",
    "output": f"loss = {MINUS}J = {MINUS}(1/G) Σ_i (L_i {MINUS} β·D_i)",
}
PER_SAMPLE = ("ratio", "python@ratio#0", "clipped", "python@clipped#0", "divergence", "sub@ToyGRPO#0")


@pytest.fixture(scope="module")
def run():
    return run_grpo_step(GRPOParams())


def one_sentence(text: str) -> bool:
    text = text.replace("Dr. GRPO", "Dr GRPO")  # a name, not the end of a sentence
    return text.endswith(".") and ". " not in text and len(text) > 30


# ------------------------------------------------------------------ the seed's nodes


def test_every_seed_node_has_a_readable_name_and_one_sentence():
    names = {}
    for node in SEED.nodes:
        m = node_meaning(SEED, node.node_id)
        assert isinstance(m, NodeMeaning)
        assert m.display_name and m.display_name != node.node_id, node.node_id
        assert one_sentence(m.summary), (node.node_id, m.summary)
        names[node.node_id] = m.display_name
    assert len(set(names.values())) == len(names)  # no two nodes share a name
    assert names["ratio"] == "Policy ratio ρ" and names["clipped"] == "Clipped surrogate L"
    assert names["advantages"] == "Group advantages A"
    assert (names["policy"], names["old_policy"], names["reference_policy"]) == (
        "Policy π_θ", "Old policy π_old", "Reference policy π_ref")
    assert names["python@ratio#0"] == "The ratio expression"
    assert names["old_policy.logits"] == "Logits of π_old"


def test_required_formulas_follow_the_design():
    for node_id, formula in REQUIRED.items():
        assert node_meaning(SEED, node_id).formula == formula, node_id
    # a member takes its meaning from its parent module's template
    assert node_meaning(SEED, "python@ratio#0").formula == REQUIRED["ratio"]
    assert node_meaning(SEED, "python@clipped#0").formula == REQUIRED["clipped"]
    for policy, pi in (("policy", "π_θ"), ("old_policy", "π_old"), ("reference_policy", "π_ref")):
        assert node_meaning(SEED, f"{policy}.logits").formula == "z = W x + b"
        assert "log softmax" in node_meaning(SEED, f"{policy}.log_probabilities").formula
        assert node_meaning(SEED, f"{policy}.log_probabilities").formula.startswith(f"log {pi}(c|q)")
        assert node_meaning(SEED, policy).formula == f"log {pi}(·|q) = log softmax(W x + b)"
    assert node_meaning(SEED, "input").formula is None


def test_meaning_comes_from_the_template_not_the_id():
    doc = seed_dict()
    for node in doc["document"]["semantic"]["nodes"]:
        if node["node_id"] == "ratio":
            node["metadata"]["moduleTemplateId"] = "model::ClippedSurrogate"
    renamed = parse_snapshot(doc)
    assert node_meaning(renamed, "ratio").display_name == "Clipped surrogate L"
    assert node_meaning(renamed, "python@ratio#0").display_name == "The clipped-surrogate expression"


# ------------------------------------------------------------------ filled formulas


def evaluate(expression: str) -> float:
    """The filled expression, read back as arithmetic: it must give the recorded value."""
    py = expression.replace(MINUS, "-").replace("·", "*")
    assert re.fullmatch(r"[\d.\s()+\-*,a-z]+", py), py
    return eval(py, {"__builtins__": {}},  # noqa: S307 - digits, operators and three known functions only
                {"exp": math.exp, "min": min, "clip": lambda x, lo, hi: min(max(x, lo), hi)})


@pytest.mark.parametrize("node_id", PER_SAMPLE)
def test_filled_formulas_show_the_engines_numbers(run, node_id):
    eps, beta = run.params.clip_epsilon, run.params.beta
    for i, s in enumerate(run.samples):
        text = filled_formula(SEED, node_id, run, i)
        assert text is not None
        k = str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
        left, *middle, result = text.split(" = ")
        assert k in left and len(middle) == 1
        key = {"ratio": "ratio", "python@ratio#0": "ratio", "clipped": "clipped", "python@clipped#0": "clipped",
               "divergence": "divergence", "sub@ToyGRPO#0": "objective"}[node_id]
        assert result == significant(s[key], 4)  # the recorded output, spelt by numbers.py
        # every number written is a recorded one (or ε, β, 1), spelt by numbers.py
        recorded = {significant(v, 4) for v in s.values() if isinstance(v, float)}
        recorded |= {param(eps), param(beta), "1"}
        for number in re.findall(rf"{MINUS}?\d+(?:\.\d+)?(?:e{MINUS}?\d+)?", middle[0]):
            assert number in recorded or number.lstrip(MINUS) in recorded, (number, text)
        # and the expression, evaluated, gives the recorded value (inputs rounded to 4 digits)
        assert evaluate(middle[0]) == pytest.approx(s[key], rel=5e-3, abs=1e-3), text


def test_filled_formula_examples(run):
    s = run.samples[0]
    assert s["action"] == 1 and s["clip_active"]
    assert filled_formula(SEED, "ratio", run, 0) == "ρ₀ = exp(−2.826 − (−2.222)) = 0.5466"
    assert filled_formula(SEED, "clipped", run, 0) == \
        "L₀ = min(0.5466 · (−1.291), clip(0.5466, 1 − 0.2, 1 + 0.2) · (−1.291)) = −1.033"
    assert filled_formula(SEED, "divergence", run, 1) == \
        "D₁ = exp(−0.7374 − (−0.2044)) − (−0.7374 − (−0.2044)) − 1 = 0.1198"
    assert filled_formula(SEED, "sub@ToyGRPO#0", run, 1) == "L₁ − β·D₁ = 0.8733 − 0.04 · 0.1198 = 0.8685"


def test_no_filled_formula_without_recorded_numbers(run):
    # no per-sample formula, or the engine does not record mean(r) and std(r)
    for node_id in ("advantages", "output", "input", "policy", "policy.logits", "policy.log_probabilities"):
        assert filled_formula(SEED, node_id, run, 0) is None, node_id
    assert filled_formula(SEED, "ratio", run, len(run.samples)) is None
    assert filled_formula(SEED, "no-such-node", run, 0) is None
    # a sample without ρ: read from the ratio node's record; without log π_old anywhere: None
    lean = dataclasses.replace(run, samples=[{k: v for k, v in s.items() if k != "ratio"} for s in run.samples])
    assert filled_formula(SEED, "ratio", lean, 0) == filled_formula(SEED, "ratio", run, 0)
    no_old = dataclasses.replace(
        run, samples=[{k: v for k, v in s.items() if k != "logp_old"} for s in run.samples],
        nodes={k: v for k, v in run.nodes.items() if k != "old_policy.log_probabilities"})
    assert filled_formula(SEED, "ratio", no_old, 0) is None
    kept = dataclasses.replace(
        run, samples=[{k: v for k, v in s.items() if k != "logp_old"} for s in run.samples])
    assert filled_formula(SEED, "ratio", kept, 0) == filled_formula(SEED, "ratio", run, 0)  # from the row
    # a stage that is not GRPO shows no GRPO numbers
    assert filled_formula(SEED, "ratio", dataclasses.replace(run, kind="sft"), 0) is None


def test_filled_formula_uses_the_runs_parameters():
    run = run_grpo_step(GRPOParams(clip_epsilon=0.1, beta=0.5))
    assert ", 1 − 0.1, 1 + 0.1)" in filled_formula(SEED, "clipped", run, 0)
    assert " − 0.5 · " in filled_formula(SEED, "sub@ToyGRPO#0", run, 0)


# ------------------------------------------------------------------ choices


def test_choice_labels_name_what_each_choice_stands_for():
    for prompt in TOY_PROMPTS:
        labels = [choice_label(prompt, c) for c in range(4)]
        assert labels[prompt.correct] == f"{prompt.correct} · readable correct"
        assert sorted(label.split(" · ", 1)[1] for label in labels) == sorted(ROLE_LABELS.values())
    assert choice_label(TOY_PROMPTS[0], 1) == "1 · wrong"


# ------------------------------------------------------------------ any other graph


def test_another_snapshot_gets_names_from_ops_and_ids():
    other = parse_snapshot(other_snapshot())
    m = {n.node_id: node_meaning(other, n.node_id) for n in other.nodes}
    assert m["block<b>.fc"] == NodeMeaning(
        "Linear 5→2", "y = W x + b", "A fully connected layer: each of its 2 outputs is a weighted sum of its "
        "5 inputs plus a bias.")
    assert m["block<b>"].display_name == "Block<b>" and m["block<b>"].formula is None
    assert m["src"].display_name == "Src (input)" and m["sink"].display_name == "Sink (output)"
    assert all(one_sentence(x.summary) for x in m.values())
    assert node_meaning(other, "nowhere").display_name == "Nowhere"


def test_without_toygrpo_templates_the_seed_is_just_a_graph():
    doc = seed_dict()
    for node in doc["document"]["semantic"]["nodes"]:
        node["metadata"].pop("moduleTemplateId", None)
    plain = parse_snapshot(doc)
    assert node_meaning(plain, "input").display_name == "Input (input)"
    assert node_meaning(plain, "ratio").display_name == "Ratio"
    assert node_meaning(plain, "old_policy").display_name == "Old policy"
    assert node_meaning(plain, "policy.logits").display_name == "Linear 3→4"
    assert node_meaning(plain, "python@ratio#0").display_name == "Python statement (python #0 in ratio)"
    # the id of the torch.sub still names ToyGRPO's forward
    assert node_meaning(plain, "sub@ToyGRPO#0").formula == REQUIRED["sub@ToyGRPO#0"]


ID = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
OPS = st.sampled_from(["Linear", "LogSoftmax", "Python", "torch.sub", "Conv2d", "Module", ""])
PARAMS = st.dictionaries(st.sampled_from(["in_features", "out_features", "bias", "shape"]),
                         st.one_of(st.integers(-3, 9), st.text(max_size=4), st.booleans(), st.none()))
TEMPLATES = st.one_of(st.none(), st.sampled_from(["model::PolicyRatio", "model::CompletionPolicy", "model::X", "",
                                                  "::", "model::CompletionPolicy"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(ID, OPS, PARAMS, TEMPLATES, st.one_of(st.none(), ID)), min_size=1, max_size=6,
                unique_by=lambda t: t[0]))
def test_any_graph_gets_names_without_an_exception(nodes):
    doc = copy.deepcopy(other_snapshot())
    semantic = doc["document"]["semantic"]
    for node_id, op, params, template, instance in nodes:
        meta = {"moduleTemplateId": template, "moduleInstanceId": instance} if template is not None else {}
        semantic["nodes"].append({"node_id": node_id, "kind": "module" if op == "Module" else "layer", "op": op,
                                  "params": params, "metadata": meta})
    ids = [n["node_id"] for n in semantic["nodes"]]
    if len(set(ids)) != len(ids):
        return
    doc["document"]["view"]["node_positions"].update({i: {"x": 0, "y": 0} for i, *_ in nodes})
    snap = parse_snapshot(doc)
    for node in snap.nodes:
        m = node_meaning(snap, node.node_id)
        assert m.display_name.strip() and m.summary.strip()


# ------------------------------------------------------------------ the conventions in force
# (app/views/convention_text.py: the formulas follow the request's preset and overrides)

DUAL_CLIP_HIT = dict(seed=0, beta=0.5, learning_rate=1, inner_step=2, dual_clip=1.01)
CONVENTION_RUNS = {
    "trl": dict(preset="trl", beta=0.04),
    "verl": dict(preset="verl", rewards=(1, 0, 0, 0, 0, 0, 0, 0)),
    "dapo": dict(preset="dapo", rewards=(1, 0, 0, 1, 0, 0, 1, 0)),
    "dr_grpo": dict(preset="dr_grpo"),
    "reward_k1": dict(kl_placement="reward", kl_estimator="k1"),
    "k2_clamps": dict(kl_estimator="k2", log_ratio_clamp=0.1, kl_clamp=0.05),  # k2 is never clamped
    "k3_clamps": dict(log_ratio_clamp=0.1, kl_clamp=0.05),
    "dual_clip_hit": DUAL_CLIP_HIT,
}


def formulas(**conventions) -> dict[str, str]:
    c = GRPOParams(**conventions).conventions()
    return {n: node_meaning(SEED, n, c, 8).formula for n in REQUIRED}


def test_the_papers_conventions_give_the_designs_formulas():
    assert formulas() == REQUIRED
    assert formulas(preset="deepseekmath") == REQUIRED


def test_formulas_follow_the_conventions():
    trl = formulas(preset="trl")
    assert trl["advantages"] == f"A_i = (r_i {MINUS} mean(r)) / (std_sample(r) + ε_A)"
    assert trl["sub@ToyGRPO#0"] == f"L_i {MINUS} β·ρ_i·D_i (× ρ: TRL's bias correction)"
    assert trl["output"] == f"loss = {MINUS}J = {MINUS}Σ_i w_i·(L_i {MINUS} β·ρ_i·D_i), w_i = 1/Σ_j |o_j| = 1/G"
    dapo = formulas(preset="dapo")
    assert dapo["clipped"] == (f"L_i = min(ρ_i·A_i, clip(ρ_i, 1{MINUS}0.2, 1+0.28)·A_i), "
                               "floored at 10·A_i where A_i < 0 (dual clip)")
    assert dapo["ratio"] == f"ρ_i = exp(clamp(log π_θ(o_i|q) {MINUS} log π_old(o_i|q), ±20))"
    verl = formulas(preset="verl")
    assert verl["divergence"] == (f"D_i = clamp(exp(Δ_i) {MINUS} Δ_i {MINUS} 1, ±10) (k3), "
                                  f"Δ_i = clamp(log π_ref {MINUS} log π_θ, ±20)")
    assert formulas(preset="dr_grpo")["advantages"] == f"A_i = r_i {MINUS} mean(r)"
    assert formulas(preset="dr_grpo", max_length=16)["output"].endswith("w_i = 1/(G·max_length) = 1/(G·16)")
    assert formulas(kl_estimator="k1")["divergence"] == f"D_i = {MINUS}Δ_i (k1), Δ_i = log π_ref {MINUS} log π_θ"
    assert formulas(kl_estimator="k2")["divergence"] == f"D_i = Δ_i²/2 (k2), Δ_i = log π_ref {MINUS} log π_θ"
    reward = formulas(kl_placement="reward")
    assert reward["advantages"] == (f"A_i = (r'_i {MINUS} mean(r')) / (std_pop(r') + ε_A), "
                                    f"r'_i = r_i {MINUS} β·D_i(π_old)")
    assert "log π_old" in reward["divergence"] and "π_θ" not in reward["divergence"]
    assert reward["sub@ToyGRPO#0"] == f"L_i {MINUS} β·0 = L_i (the KL went into the reward)"
    assert reward["output"] == f"loss = {MINUS}J = {MINUS}(1/G) Σ_i L_i"
    # a Python member says what its module says
    c = GRPOParams(preset="dapo").conventions()
    assert node_meaning(SEED, "python@clipped#0", c).formula == dapo["clipped"]


@pytest.mark.parametrize("preset", ["deepseekmath", "trl", "verl", "dr_grpo", "dapo"])
def test_every_preset_keeps_one_sentence_per_node(preset):
    for extra in ({}, {"kl_placement": "reward", "kl_bias_correction": False}, {"kl_estimator": "k1"}):
        c = GRPOParams(preset=preset, **extra).conventions()
        for node in SEED.nodes:
            m = node_meaning(SEED, node.node_id, c, 8)
            assert one_sentence(m.summary), (preset, extra, node.node_id, m.summary)
            assert m.display_name == node_meaning(SEED, node.node_id).display_name  # the graph's name


def test_the_loss_says_the_aggregations_coincide_on_one_token():
    note = node_meaning(SEED, "output", GRPOParams().conventions(), 8).note
    assert note is not None and one_sentence(note)
    assert "one token" in note and "coincide" in note and "1/G = 0.125" in note
    longer = node_meaning(SEED, "output", GRPOParams(preset="dr_grpo", max_length=4).conventions(), 8).note
    assert "1/(G·max_length) = 0.03125" in longer and "1/G = 0.125" in longer
    assert node_meaning(SEED, "output").note is None  # no run, no G: nothing to say
    assert all(node_meaning(SEED, n, GRPOParams().conventions(), 8).note is None for n in REQUIRED if n != "output")


def evaluate_general(expression: str) -> float:
    """`evaluate`, with the conventions' max (dual clip), clamp and ² (k2) too."""
    py = expression.replace(MINUS, "-").replace("·", "*").replace("²", "**2")
    assert re.fullmatch(r"[\d.\s()+\-*/,a-z]+", py), py
    return eval(py, {"__builtins__": {}},  # noqa: S307 - digits, operators and known functions only
                {"exp": math.exp, "min": min, "max": max, "clip": lambda x, lo, hi: min(max(x, lo), hi),
                 "clamp": lambda x, lo, hi: min(max(x, lo), hi)})


@pytest.mark.parametrize("name", sorted(CONVENTION_RUNS))
@pytest.mark.parametrize("node_id", PER_SAMPLE)
def test_filled_formulas_follow_the_conventions(name, node_id):
    run = run_grpo_step(GRPOParams(**CONVENTION_RUNS[name]))
    key = {"ratio": "ratio", "python@ratio#0": "ratio", "clipped": "clipped", "python@clipped#0": "clipped",
           "divergence": "divergence", "sub@ToyGRPO#0": "objective"}[node_id]
    for i, s in enumerate(run.samples):
        text = filled_formula(SEED, node_id, run, i)
        assert text is not None, (name, node_id, i)
        left, middle, result = text.split(" = ")
        assert result == significant(s[key], 4)
        assert evaluate_general(middle) == pytest.approx(s[key], rel=5e-3, abs=1e-3), text


def test_filled_formulas_name_each_convention():
    trl = run_grpo_step(GRPOParams(**CONVENTION_RUNS["trl"]))
    s = trl.samples[1]
    assert filled_formula(SEED, "sub@ToyGRPO#0", trl, 1) == (
        f"L₁ − β·ρ₁·D₁ = {significant(s['clipped'], 4)} − 0.04 · {significant(s['kl_rho_factor'], 4)} · "
        f"{significant(s['divergence'], 4)} = {significant(s['objective'], 4)}")
    dapo = run_grpo_step(GRPOParams(**CONVENTION_RUNS["dapo"]))
    negative = next(i for i, s in enumerate(dapo.samples) if s["advantage"] < 0)
    text = filled_formula(SEED, "clipped", dapo, negative)
    assert text.startswith(f"L{str(negative).translate(str.maketrans('0123456789', '₀₁₂₃₄₅₆₇₈₉'))} = max(min(")
    assert ", 1 − 0.2, 1 + 0.28)" in text and ", 10 · (−" in text
    positive = next(i for i, s in enumerate(dapo.samples) if s["advantage"] > 0)
    assert "max(" not in filled_formula(SEED, "clipped", dapo, positive)  # the floor is for A < 0 only
    clamps = run_grpo_step(GRPOParams(**CONVENTION_RUNS["k3_clamps"]))
    assert clamps.samples[0]["ratio_clamped"] and clamps.samples[0]["kl_log_ratio_clamped"]
    assert filled_formula(SEED, "ratio", clamps, 0).startswith("ρ₀ = exp(clamp(")
    assert filled_formula(SEED, "divergence", clamps, 0).startswith("D₀ = exp(clamp(")
    k2 = run_grpo_step(GRPOParams(**CONVENTION_RUNS["k2_clamps"]))
    assert filled_formula(SEED, "ratio", k2, 0).startswith("ρ₀ = exp(clamp(")  # the ratio's clamp stays
    assert filled_formula(SEED, "divergence", k2, 0).startswith("D₀ = (") and "clamp" not in \
        filled_formula(SEED, "divergence", k2, 0)
    assert formulas(kl_estimator="k2", log_ratio_clamp=20, kl_clamp=10)["divergence"] == (
        f"D_i = Δ_i²/2 (k2), Δ_i = log π_ref {MINUS} log π_θ")
    reward = run_grpo_step(GRPOParams(**CONVENTION_RUNS["reward_k1"]))
    s = reward.samples[0]
    assert filled_formula(SEED, "divergence", reward, 0) == (
        f"D₀ = −({significant(s['logp_ref'], 4)} − ({significant(s['logp_old'], 4)})) = "
        f"{significant(s['divergence'], 4)}")  # the old policy's KL: it went into the reward
    assert filled_formula(SEED, "sub@ToyGRPO#0", reward, 0).startswith("L₀ − β·0 = ")
