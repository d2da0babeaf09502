"""A file written to UNIPO's canonical schema opens, and its per-token objective equals the file's
token_objective.

UNIPO's token_objective (docs/canonical_schema.json: "Per-token objective, not loss"; grpo.json:
min(Ratio·Advantage, clip(Ratio, 1 − ε, 1 + ε)·Advantage) − β·KL) is the objective's sign and holds no
aggregation weight (UNIPO shows the aggregation as its own section), so it is compared with
recompute's `per_token` (L − β·KL) as it is; the aggregation is checked on its own, against the
logged policy_objective (grpo.json's 1/N Σ 1/G Σ 1/|o_i| Σ_t over the step's responses).
"""
from __future__ import annotations

import numpy as np
import pytest
from unipo_fixture import FIXTURE, fixture_script

from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.domain.unipo import token_objectives
from app.kinds.step_record.engine.step import recompute


def test_the_per_token_objective_equals_the_files_token_objective(unipo):
    record = parse_record(FIXTURE.read_bytes(), "unipo_canonical.json")
    result = recompute(record)
    expected = token_objectives(unipo)
    assert len(result.completions) == len(expected) == 8
    for mine, theirs in zip(result.completions, expected, strict=True):
        assert mine.per_token.shape == theirs.shape
        np.testing.assert_allclose(mine.per_token, theirs, rtol=1e-12, atol=1e-15)
    # not a vacuous match: ratios clip on both sides, and the KL term is there
    ratio = np.concatenate([c.ratio for c in result.completions])
    adv = np.concatenate([np.full(len(c.ratio), c.advantage) for c in result.completions])
    assert ((ratio > 1.2) & (adv > 0)).any() and ((ratio < 0.8) & (adv < 0)).any()
    assert all(np.abs(c.kl).max() > 1e-4 for c in result.completions)


def test_the_aggregated_objective_is_the_logged_policy_objective(unipo):
    result = recompute(parse_record(unipo))
    logged = unipo["entries"][1]["metrics"]["policy_objective"]
    assert -result.loss == pytest.approx(logged, rel=1e-12, abs=1e-15)
    weights = np.concatenate([c.weight for c in result.completions])
    assert weights.sum() == pytest.approx(1.0)  # sample_mean: 1/(G·|o_i|) per token


def test_asymmetric_clip_without_kl_matches_too(unipo):
    """DAPO's conventions (clip-higher, no KL): the file's token_objective recomputed for them by the
    fixture's own formula, and the record recomputed by the engine, agree."""
    token_objective = fixture_script().token_objective
    unipo["header"]["algorithm"] = "dapo"
    unipo["header"]["hparams"].update({"clip_eps": [0.2, 0.28], "kl_coef": 0.0})
    for group in unipo["entries"][1]["prompts"]:
        for response in group["responses"]:
            t = response["tokens"]
            t["token_objective"] = token_objective(np.array(t["log_probs"]), np.array(t["old_log_probs"]),
                                                   np.array(t["advantages"]), np.array(t["token_kl"]),
                                                   0.2, 0.28, 0.0).tolist()
    result = recompute(parse_record(unipo))
    for mine, theirs in zip(result.completions, token_objectives(unipo), strict=True):
        np.testing.assert_allclose(mine.per_token, theirs, rtol=1e-12, atol=1e-15)
