"""The per-token findings (domain/token_findings.py): each rule on a run built to trigger it and on one built
not to; a run with no per-token numbers says nothing of them."""
from __future__ import annotations

from run_fixtures import healthy

from app.runs.domain.run_findings import findings
from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.token_findings import low_signal, mask_blind, mismatch_band


def run(per_step: dict[str, list[float]]):
    n = len(next(iter(per_step.values())))
    return read_trainer_state({"log_history": [{"step": s + 1, **{k: v[s] for k, v in per_step.items()}}
                                               for s in range(n)]})


def test_mismatch_band_names_the_worst_step_and_how_many_crossed():
    log = run({"tokens/outside_is_band": [0.0, 0.002, 0.03, 0.015, 0.0],
               "tokens/mismatch_abs_p99": [0.1, 0.2, 1.4, 0.9, 0.1]})
    (f,) = mismatch_band(log)
    assert f.steps == (3,) and f.numbers["steps_over"] == 2
    assert f.sentence.startswith("At step 3, 3 % of the trained tokens had a train/inference ratio")
    assert "outside [0.5, 2]" in f.sentence and "1.4 nats" in f.sentence and "2 of 5 steps" in f.sentence
    assert mismatch_band(run({"tokens/outside_is_band": [0.0, 0.009, 0.0]})) == []


def test_mask_blind_says_how_far_a_mask_blind_view_is_off():
    log = run({"tokens/mismatch_kl": [0.001, 0.002, 0.0], "tokens/mismatch_kl_mask_blind": [0.5, 0.004, 0.0]})
    (f,) = mask_blind(log)
    assert f.steps == (1,) and "would read 0.5 nats, 500 × the 0.001" in f.sentence
    # close to the real number, or too small to mislead anyone: silent
    assert mask_blind(run({"tokens/mismatch_kl": [0.01], "tokens/mismatch_kl_mask_blind": [0.05]})) == []
    assert mask_blind(run({"tokens/mismatch_kl": [0.0001], "tokens/mismatch_kl_mask_blind": [0.005]})) == []


def test_low_signal_says_where_the_gradient_went():
    log = run({"tokens/carry_gradient": [0.9, 0.3, 0.45], "tokens/zero_advantage": [0.1, 0.6, 0.55],
               "tokens/is_masked": [0.0, 0.1, 0.0]})
    (f,) = low_signal(log)
    assert f.steps == (2,) and f.sentence == (
        "At step 2 only 30 % of the trained tokens carried gradient: 60 % had advantage 0 (their group's rewards "
        "were all equal) and 10 % were dropped by the trainer's importance-sampling mask. 2 of 3 steps were under "
        "50 %.")
    assert low_signal(run({"tokens/carry_gradient": [0.5, 0.8]})) == []


def test_a_run_without_per_token_numbers_has_no_per_token_finding():
    rules = {f.rule for f in findings(read_trainer_state(healthy(30)))}
    assert not rules & {"mismatch_band", "mask_blind", "low_signal"}
