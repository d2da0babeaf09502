"""A real TRL record (tests/fixtures/trl_step_record.grpo-step.json), opened without TRL.

Written by the TRL recorder (app/kinds/step_record/recorders/trl.py) in peers/test_trl_recorder.py: step 2 of a CPU
GRPOTrainer run (TRL 1.16.0, loss_type dapo, beta 0.1, num_iterations 2, so the policy had moved
since sampling and some ratios were clipped). `UPDATE_TRL_FIXTURE=1 make peers` writes it again.
"""
from __future__ import annotations

from paths import ROOT

from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.checks import checks
from app.kinds.step_record.engine.step import recompute

FIXTURE = ROOT / "tests" / "fixtures" / "trl_step_record.grpo-step.json"


def test_the_app_recomputes_what_trl_logged():
    record = parse_record(FIXTURE.read_bytes(), str(FIXTURE))
    assert (record.run.framework, record.run.framework_version, record.run.step) == ("trl", "1.16.0", 2)
    assert record.config.loss_aggregation == "token_mean" and record.config.beta == 0.1
    assert all(c.old_logprobs is not None and c.ref_logprobs is not None for _, _, c in record.completions())
    found = {c.key: c for c in checks(record, recompute(record))}
    assert {"loss", "kl", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean",
            "clip_ratio/region_mean"} <= set(found)
    assert record.metrics["clip_ratio/region_mean"] > 0  # the clip band was reached
    assert all(c.ok for c in found.values()), [(c.key, c.logged, c.recomputed, c.rel) for c in found.values()]
