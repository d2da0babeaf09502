"""A recorded step's ∂loss/∂log π per token, split into its surrogate and KL parts (grad_surrogate,
grad_kl) under the record's own conventions and under what-ifs: they add up to the recomputed
gradient (1e-12, float64) and each equals the float64 reference's hand-derived part
(tests/grpo_reference.py token_gradient_parts, fed the record's own advantages and sampling log-probs)."""
from __future__ import annotations

import grpo_reference as ref
import numpy as np
import pytest
from record_factory import make_record

from app.engine.grpo.params import Conventions
from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.step import recompute

TOL = 1e-12

CASES = [
    dict(loss_aggregation="sample_mean"),
    dict(loss_aggregation="token_mean", kl_bias_correction=True),  # TRL's KL × ρ
    dict(loss_aggregation="token_sum_norm"),  # Dr. GRPO's constant
    dict(loss_aggregation="sample_mean", importance_sampling_level="sequence", kl_bias_correction=True),  # GSPO
    dict(loss_aggregation="token_mean", policy_loss="cispo", clip_epsilon_high=1.1),
    dict(loss_aggregation="token_mean", is_correction="token_truncate", is_clip_max=1.02),  # TRL's vLLM IS
    dict(loss_aggregation="token_mean", beta=0.0),  # no KL term: its part is 0
]


def _check(raw: dict, record, got, c: Conventions, advantages, weights=None):
    rows, sampling = [], []
    for comp in got.completions:
        done = raw["groups"][comp.group]["completions"][comp.index]
        rows.append(list(zip(done["logprobs"], done["old_logprobs"], done["ref_logprobs"], strict=True)))
        sampling.append(done["sampling_logprobs"])
    want_s, want_k = ref.token_gradient_parts(rows, [0.0] * len(rows), c.model_dump(), sampling=sampling,
                                              advantages_given=advantages, weights=weights)
    for k, comp in enumerate(got.completions):
        assert np.max(np.abs(comp.grad_surrogate + comp.grad_kl - comp.grad)) <= TOL, k
        assert comp.grad_surrogate == pytest.approx(want_s[k], rel=1e-9, abs=TOL), k
        assert comp.grad_kl == pytest.approx(want_k[k], rel=1e-9, abs=TOL), k
    kl = np.concatenate([comp.grad_kl for comp in got.completions])
    assert (not kl.any()) if c.beta == 0 or c.kl_placement == "reward" else kl.any()


@pytest.mark.parametrize("config", CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_the_records_own_parts_equal_the_reference(config):
    raw = make_record(seed=11, groups=3, size=4, lengths=(2, 12), drift=0.4, **config)
    record = parse_record(raw)
    got = recompute(record)
    _check(raw, record, got, got.conventions, [comp.advantage for comp in got.completions])


def test_a_global_token_normalizer_divides_both_parts():
    raw = make_record(seed=12, loss_aggregation="token_mean", drift=0.4)
    tokens = sum(len(c["token_ids"]) for g in raw["groups"] for c in g["completions"])
    raw["config"]["token_normalizer"] = 3.0 * tokens
    record = parse_record(raw)
    got = recompute(record)
    _check(raw, record, got, got.conventions, [comp.advantage for comp in got.completions],
           weights=[1 / (3.0 * tokens)] * len(got.completions))


@pytest.mark.parametrize("preset", ["deepseekmath", "dr_grpo", "dapo", "verl"])
def test_a_what_ifs_parts_equal_the_reference(preset):
    raw = make_record(seed=13, groups=2, size=4, lengths=(2, 10), drift=0.4)
    record = parse_record(raw)
    c = Conventions(preset=preset, beta=0.05, max_length=10)
    got = recompute(record, c)
    _check(raw, record, got, c, list(got.advantages))
