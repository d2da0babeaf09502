"""Each finding rule of a run (app/runs/domain/run_findings.py) on a run built to trigger it and on one
built not to (run_fixtures.healthy: no rule speaks of it), with the numbers and steps it names."""
from __future__ import annotations

import math

import pytest
from run_fixtures import entry, healthy, state

from app.runs.domain import run_findings as rf
from app.runs.domain.run_log import read_trainer_state


def run(n=60, **per_step):
    """A healthy run with some metrics replaced: per_step[name] = f(step) -> value."""
    document = healthy(n)
    for e in document["log_history"][:-1]:
        for name, f in per_step.items():
            e[name] = f(e["step"])
    return read_trainer_state(document)


HEALTHY = read_trainer_state(healthy())


@pytest.mark.parametrize("rule", rf.RULES, ids=lambda r: r.__name__)
def test_no_rule_speaks_of_a_healthy_run(rule):
    assert rule(HEALTHY) == []


def test_clip_never_says_it_is_expected_with_one_iteration():
    (f,) = rf.clip_never(run(**{"clip_ratio/region_mean": lambda s: 0.0}))
    assert "0 at every one of the 60 logged steps" in f.sentence and "num_iterations = 1" in f.sentence
    assert "expected, not a bug" in f.sentence and f.steps == (1, 60)
    assert rf.clip_never(run(**{"clip_ratio/region_mean": lambda s: 0.0 if s != 30 else 1e-4})) == []


def test_clip_never_reads_low_and_high_when_there_is_no_region_mean():
    document = healthy(20)
    for e in document["log_history"][:-1]:
        del e["clip_ratio/region_mean"]
    assert rf.clip_never(read_trainer_state(document))  # low_mean + high_mean: 0 everywhere in the fixture
    document["log_history"][5]["clip_ratio/high_mean"] = 0.01
    assert rf.clip_never(read_trainer_state(document)) == []


def test_clip_never_reads_unipos_clip_fraction_when_the_log_has_no_trl_clip_ratio():
    document = healthy(20)
    for e in document["log_history"][:-1]:
        for name in ("clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean"):
            e.pop(name, None)
        e["clip_fraction"] = 0.0
    (f,) = rf.clip_never(read_trainer_state(document))
    assert "(clip_fraction) is 0 at every one of the 20 logged steps" in f.sentence
    assert f.metrics == ("clip_fraction",)
    document["log_history"][7]["clip_fraction"] = 0.02
    assert rf.clip_never(read_trainer_state(document)) == []


def test_tied_groups_names_the_worst_step_and_how_many_crossed():
    (f,) = rf.tied_groups(run(frac_reward_zero_std=lambda s: 0.75 if s in (12, 13) else (0.9 if s == 40 else 0.1)))
    assert f.steps == (40,) and "At step 40, 90 % of the groups" in f.sentence and "3 of 60 logged steps" in f.sentence
    assert rf.tied_groups(run(frac_reward_zero_std=lambda s: 0.49)) == []


def test_loss_zero_says_it_is_no_bug_unless_every_group_was_tied():
    (f,) = rf.loss_zero(run(loss=lambda s: 0.0 if s > 50 else 0.02,
                            frac_reward_zero_std=lambda s: 1.0 if s > 55 else 0.1))
    assert "The logged loss is 0 at 10 steps, first at step 51. That alone is no bug" in f.sentence
    assert "At 5 of them every group was tied (frac_reward_zero_std 1, first at step 56)" in f.sentence
    assert f.steps == (56,) and f.numbers["all_tied"] == 5 and "grad_norm" not in f.sentence
    (stuck,) = rf.loss_zero(run(loss=lambda s: 0.0 if s > 50 else 0.02, grad_norm=lambda s: 0.0 if s > 58 else 0.5,
                                frac_reward_zero_std=lambda s: 1.0 if s > 55 else 0.1))
    assert "grad_norm is 0 at 2 of them (first at step 59): no update at all there." in stuck.sentence
    (untied,) = rf.loss_zero(run(loss=lambda s: 0.0 if s == 7 else 0.02))
    assert "at 1 step, first at step 7" in untied.sentence and "At none of them was every group tied" in untied.sentence
    document = healthy(10)
    for e in document["log_history"][:-1]:
        e["loss"] = 0.0
        del e["frac_reward_zero_std"]
    (unknown,) = rf.loss_zero(read_trainer_state(document))
    assert "is not logged" in unknown.sentence


def test_truncated_names_the_share_of_cut_completions():
    (f,) = rf.truncated(run(**{"completions/clipped_ratio": lambda s: 0.5 if s == 7 else 0.05}))
    assert f.steps == (7,) and "50 % of the completions hit max_completion_length" in f.sentence
    assert rf.truncated(run(**{"completions/clipped_ratio": lambda s: 0.19})) == []


def test_a_kl_spike_is_one_finding_at_its_peak():
    (f,) = rf.kl_spike(run(kl=lambda s: {30: 0.3, 31: 0.5, 32: 0.2}.get(s, 0.02)))
    assert f.steps == (31,) and f.numbers["median_before"] == pytest.approx(0.02)
    assert "KL spiked at step 31: 0.5, 25.0 ×" in f.sentence
    assert rf.kl_spike(run(kl=lambda s: 0.0004 * (s % 5))) == [], "below the floor: noise around 0 is no spike"
    two = rf.kl_spike(run(kl=lambda s: 0.4 if s in (20, 45) else 0.02))
    assert [f.steps for f in two] == [(20,), (45,)]


def test_entropy_fall_names_its_bounding_steps():
    (f,) = rf.entropy_fall(run(entropy=lambda s: 0.84 if s <= 20 else max(0.32, 0.84 - 0.02 * (s - 20))))
    assert f.steps[0] == 20 and f.numbers["share"] == pytest.approx((0.84 - 0.32) / 0.84)
    assert "Entropy fell 62 % between steps 20 and" in f.sentence and "(0.84 → 0.32)" in f.sentence
    assert rf.entropy_fall(run(entropy=lambda s: 0.8 - 0.006 * s)) == []  # 45 %: under the line


def test_not_finite_names_each_metric_first_bad_step():
    found = rf.not_finite(run(loss=lambda s: math.nan if s >= 33 else 0.02, kl=lambda s: math.inf if s == 9 else 0.01))
    by_metric = {f.sentence.split(" ")[0]: f for f in found}
    assert by_metric["loss"].steps == (33,) and "and at 27 logged steps after it" in by_metric["loss"].sentence
    assert by_metric["kl"].steps == (9,) and by_metric["kl"].sentence == "kl is inf at step 9."


def test_a_rule_whose_metric_is_absent_says_nothing():
    bare = read_trainer_state(state([{"step": s, "loss": 0.1} for s in range(1, 20)]))
    assert rf.findings(bare) == []
    assert [f.rule for f in rf.findings(read_trainer_state(state([entry(1, loss=0.0, **{"clip_ratio/region_mean": 0.01})])))] == ["loss_zero"]
