"""Each stage of each path against an independent computation in plain Python floats."""
import math

import grpo_reference as ref
import pytest
from paths import PROCESSES_PATH

from app.kinds.toy.domain.process_spec import load_processes
from app.kinds.toy.domain.toy_task import TOY_PROMPTS
from app.kinds.toy.engine.processes import GROUP_SIZE, GRPO_LR, run_process
from app.kinds.toy.engine.stage_step import stage_step

CATALOG = load_processes(PROCESSES_PATH)
FEATURES = [list(p.features) for p in TOY_PROMPTS]


def logits_of(state, x):
    """Plain-Python forward of a teacher (Linear) or student (width-1 bottleneck) policy."""
    if "logits.weight" in state:
        return ref.linear(state["logits.weight"].tolist(), state["logits.bias"].tolist(), x)
    hidden = [sum(w * xi for w, xi in zip(row, x, strict=True)) for row in state["logits.0.weight"].tolist()]
    return ref.linear(state["logits.1.weight"].tolist(), state["logits.1.bias"].tolist(), hidden)


def logp(state, prompt):
    return ref.log_softmax(logits_of(state, FEATURES[prompt]))


def cross_entropy(state, pairs):
    return sum(-logp(state, i)[c] for i, c in pairs) / len(pairs)


def grpo_mean_loss(policy, old, reference, actions, rewards):
    total = 0.0
    for i in range(len(TOY_PROMPTS)):
        acts = actions[i].tolist()
        lp, lo, lr = logp(policy, i), logp(old, i), logp(reference, i)
        total += ref.grpo_loss([lp[a] for a in acts], [lo[a] for a in acts], [lr[a] for a in acts],
                               rewards[i].tolist(), 0.2, 0.04, 1e-4)[0]
    return total / len(TOY_PROMPTS)


@pytest.fixture(scope="module")
def runs():
    return {pid: run_process(CATALOG, pid, 0) for pid in CATALOG.ids}


def test_sft_stages_minimise_cross_entropy(runs):
    for pid, sid in (("r1", "cold-start"), ("r1", "sft-from-base"), ("distillation", "student-sft")):
        stage = runs[pid].stage(sid)
        pairs = list(stage.last.targets)
        assert pairs, sid
        assert stage.curve[-1].loss == pytest.approx(cross_entropy(stage.last.policy_state, pairs), abs=1e-12)
        assert stage.curve[0].loss == pytest.approx(cross_entropy(stage.start_state, pairs), abs=1e-12)
        assert cross_entropy(stage.end_state, pairs) < cross_entropy(stage.start_state, pairs)


def test_cold_start_data_is_the_readable_correct_answer_of_half_the_prompts(runs):
    pairs = runs["r1"].stage("cold-start").last.targets
    assert [(i, TOY_PROMPTS[i].role(c)) for i, c in pairs] == [(0, "correct"), (1, "correct"), (2, "correct")]


def test_grpo_stages_follow_the_grpo_formulas(runs):
    for pid, sid in (("r1-zero", "rl"), ("r1", "reasoning-rl"), ("r1", "all-scenarios-rl")):
        stage = runs[pid].stage(sid)
        last = stage.last
        assert last.actions.shape == (len(TOY_PROMPTS), GROUP_SIZE)
        want = grpo_mean_loss(last.policy_state, last.old_state, last.reference_state, last.actions, last.rewards)
        assert stage.curve[-1].loss == pytest.approx(want, abs=1e-12)
        # the reference is the checkpoint the stage started from
        assert all((last.reference_state[k] == stage.start_state[k]).all() for k in stage.start_state)


def test_grpo_update_is_a_gradient_step(runs):
    stage = runs["r1-zero"].stage("rl")
    last = stage.last
    h = 1e-6
    for name in ("logits.weight", "logits.bias"):
        flat = last.policy_state[name].flatten()
        for k in range(flat.numel()):
            def loss_at(delta, name=name, k=k):
                state = {n: t.clone() for n, t in last.policy_state.items()}
                state[name].view(-1)[k] += delta
                return grpo_mean_loss(state, last.old_state, last.reference_state, last.actions, last.rewards)
            grad = (loss_at(h) - loss_at(-h)) / (2 * h)
            assert float(stage.end_state[name].flatten()[k]) == pytest.approx(float(flat[k]) - GRPO_LR * grad, abs=1e-7)


def test_stage_rewards_follow_the_rule(runs):
    stage = runs["r1"].stage("reasoning-rl")
    expected = {"correct": 2.0, "mixed": 1.5, "unformatted": 0.5, "wrong": 1.0}
    for i in range(len(TOY_PROMPTS)):
        for a, r in zip(stage.last.actions[i].tolist(), stage.last.rewards[i].tolist(), strict=True):
            assert r == expected[TOY_PROMPTS[i].role(a)]


def test_rejection_sampling_keeps_only_fully_rewarded_samples(runs):
    for pid, sid, source in (("r1", "rejection-sampling", runs["r1"].stage("reasoning-rl").end_state),
                             ("distillation", "curate", runs["r1"].stages[-1].end_state)):
        stage = runs[pid].stage(sid)
        assert stage.sampled == 16 * len(TOY_PROMPTS)
        assert 0 < len(stage.dataset) <= stage.sampled
        assert {TOY_PROMPTS[i].role(c) for i, c in stage.dataset} == {"correct"}
        assert all((stage.start_state[k] == source[k]).all() for k in source)


def test_distillation_has_no_rl_and_a_smaller_student(runs):
    dist = runs["distillation"]
    assert not any(s.stage.kind == "grpo" for s in dist.stages)
    student = dist.stage("student-sft")
    assert student.stage.kind == "distill_sft"
    teacher_params = sum(t.numel() for t in runs["r1"].stages[-1].end_state.values())
    student_params = sum(t.numel() for t in student.end_state.values())
    assert (student_params, teacher_params) == (11, 16)
    assert all(p.train_reward is None for p in student.curve)  # SFT only: no sampled reward


def test_metrics_are_exact_expectations(runs):
    stage = runs["r1"].stages[-1]
    probs = [[math.exp(v) for v in logp(stage.end_state, i)] for i in range(len(TOY_PROMPTS))]
    roles = [[TOY_PROMPTS[i].role(c) for c in range(4)] for i in range(len(TOY_PROMPTS))]
    value = {"correct": 2.0, "mixed": 1.5, "unformatted": 0.5, "wrong": 1.0}
    m = stage.end_metrics
    n = len(TOY_PROMPTS)
    assert m.p_correct == pytest.approx(sum(p[r.index("correct")] for p, r in zip(probs, roles, strict=True)) / n, abs=1e-12)
    assert m.p_mixed == pytest.approx(sum(p[r.index("mixed")] for p, r in zip(probs, roles, strict=True)) / n, abs=1e-12)
    assert m.eval_reward == pytest.approx(sum(sum(pc * value[rc] for pc, rc in zip(p, r, strict=True)) for p, r in zip(probs, roles, strict=True)) / n, abs=1e-12)
    greedy_right = [r[max(range(4), key=lambda c: p[c])] in ("correct", "mixed") for p, r in zip(probs, roles, strict=True)]
    assert m.accuracy == sum(greedy_right) / n
    ref_lp = [logp(stage.start_state, i) for i in range(n)]
    kl = sum(sum(pc * (math.log(pc) - rl) for pc, rl in zip(p, r, strict=True)) for p, r in zip(probs, ref_lp, strict=True)) / n
    assert m.divergence == pytest.approx(kl, abs=1e-12)


def test_language_reward_changes_what_rl_learns(runs):
    """R1-Zero's rule pays mixed-language answers like readable ones; R1 ends far more readable."""
    zero, r1 = runs["r1-zero"].final, runs["r1"].final
    assert zero.p_mixed > 2 * r1.p_mixed
    assert r1.p_correct > zero.p_correct


def test_deterministic_per_seed_and_r1_accuracy_is_stable():
    run_process.cache_clear()
    a = run_process(CATALOG, "r1", 0)
    run_process.cache_clear()
    b = run_process(CATALOG, "r1", 0)
    assert a is not b
    assert [p.metrics for s in a.stages for p in s.curve] == [p.metrics for s in b.stages for p in s.curve]
    assert a.final == b.final and a.final.accuracy == 1.0
    other = run_process(CATALOG, "r1", 1)
    assert [p.metrics for p in other.stages[1].curve] != [p.metrics for p in a.stages[1].curve]


def test_iterations_scale_doubles_the_curves():
    single, double = run_process(CATALOG, "r1-zero", 0, 1), run_process(CATALOG, "r1-zero", 0, 2)
    assert len(double.stages[0].curve) == 2 * len(single.stages[0].curve)


def test_stage_step_sft_marks_grpo_nodes_inactive_and_matches_cross_entropy(runs):
    step = stage_step(runs["r1"], "cold-start", 1)
    assert step.kind == "sft"
    for node in ("ratio", "clipped", "divergence", "advantages", "old_policy", "python@clipped#0"):
        assert step.nodes[node].inactive_reason and step.nodes[node].values is None
    pairs = runs["r1"].stage("cold-start").last.targets
    share = sum(-logp(runs["r1"].stage("cold-start").last.policy_state, i)[c] for i, c in pairs if i == 1) / len(pairs)
    assert step.loss == pytest.approx(share, abs=1e-12) and step.nodes["output"].values == pytest.approx(share, abs=1e-12)
    assert step.nodes["policy.logits"].grad is not None


def test_stage_step_grpo_replays_the_last_update(runs):
    step = stage_step(runs["r1-zero"], "rl", 2)
    last = runs["r1-zero"].stage("rl").last
    acts = last.actions[2].tolist()
    lp, lo, lr = logp(last.policy_state, 2), logp(last.old_state, 2), logp(last.reference_state, 2)
    loss, rows = ref.grpo_loss([lp[a] for a in acts], [lo[a] for a in acts], [lr[a] for a in acts],
                               last.rewards[2].tolist(), 0.2, 0.04, 1e-4)
    assert step.loss == pytest.approx(loss, abs=1e-12)
    assert [s["ratio"] for s in step.samples] == pytest.approx([r["ratio"] for r in rows], abs=1e-12)


def test_stage_step_rejection_sampling_has_no_gradients(runs):
    step = stage_step(runs["r1"], "rejection-sampling", 0)
    assert step.kind == "rejection_sampling"
    assert step.nodes["policy.logits"].grad is None and step.nodes["output"].inactive_reason
    assert all(s["role"] == "correct" and s["kept"] for s in step.samples)
