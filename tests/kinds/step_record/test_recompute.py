"""A recorded step recomputed (engine/step.py) against an independent float64 reference written
here from TRL 1.16's `_compute_loss` (grpo_trainer.py ~3020-3270), in numpy, one completion at a time:
the loss under each aggregation, GSPO's sequence ratio, CISPO, the KL with TRL's bias correction, the
metrics TRL logs, and ∂loss/∂log π against central differences of the reference."""
from __future__ import annotations

import numpy as np
import pytest
from record_factory import make_record

from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.checks import checks
from app.kinds.step_record.engine.step import recompute

AGGREGATIONS = ("sample_mean", "token_mean", "token_sum_norm")


def reference(raw: dict, logp_override: dict | None = None) -> dict:
    """TRL's numbers for the record's completions (one batch), from its formulas, in numpy float64."""
    cfg = {"clip_epsilon": 0.2, "clip_epsilon_high": 0.2, "beta": 0.0, "kl_bias_correction": False,
           "loss_aggregation": "token_mean", "importance_sampling_level": "token", "policy_loss": "clip",
           "max_length": 1, **raw["config"]}
    lo, hi, beta = cfg["clip_epsilon"], cfg["clip_epsilon_high"], cfg["beta"]
    rows, low, high, kls, lengths = [], [], [], [], []
    for g, group in enumerate(raw["groups"]):
        for i, c in enumerate(group["completions"]):
            logp = np.asarray(c["logprobs"], float)
            if logp_override and (g, i) in logp_override:
                logp = logp_override[(g, i)]
            old = np.asarray(c["old_logprobs"], float)
            ref = np.asarray(c["ref_logprobs"], float)
            a = c["advantage"]
            log_ratio = logp - old
            if cfg["importance_sampling_level"] == "sequence":
                log_ratio = np.full_like(logp, log_ratio.mean())
            coef1 = np.exp(log_ratio)
            if cfg["policy_loss"] == "cispo":
                term = -np.minimum(coef1, hi) * a * logp  # the cap is a constant (detach) in TRL
                low.append(np.zeros_like(logp, bool))
                high.append((coef1 > hi) & (a > 0))
            else:
                term = -np.minimum(coef1 * a, np.clip(coef1, 1 - lo, 1 + hi) * a)
                low.append((coef1 < 1 - lo) & (a < 0))
                high.append((coef1 > 1 + hi) & (a > 0))
            kl = np.exp(ref - logp) - (ref - logp) - 1
            if cfg["kl_bias_correction"]:
                kl = kl * coef1
            if beta:
                term = term + beta * kl
            rows.append(term)
            kls.append(kl)
            lengths.append(len(logp))
    n = len(rows)
    agg = cfg["loss_aggregation"]
    if agg == "sample_mean":
        loss = np.mean([r.sum() / len(r) for r in rows])
    elif agg == "token_mean":
        loss = sum(r.sum() for r in rows) / sum(lengths)
    else:
        loss = sum(r.sum() for r in rows) / (n * cfg["max_length"])
    tokens = sum(lengths)
    out = {"loss": loss, "kl": sum(k.sum() for k in kls) / tokens if beta else None}
    if cfg["importance_sampling_level"] == "sequence":  # TRL: (B, 1) flags, a mean over sequences
        share = lambda flags: float(np.mean([f[0] for f in flags]))  # noqa: E731
    else:
        share = lambda flags: float(sum(f.sum() for f in flags) / tokens)  # noqa: E731
    if cfg["policy_loss"] == "cispo":
        out["cispo_clip_ratio"] = share(high)
    else:
        out["clip_ratio/low_mean"], out["clip_ratio/high_mean"] = share(low), share(high)
        out["clip_ratio/region_mean"] = share([a | b for a, b in zip(low, high, strict=True)])
    return out


CASES = [dict(loss_aggregation=a) for a in AGGREGATIONS] + [
    dict(loss_aggregation="sample_mean", importance_sampling_level="sequence"),
    dict(loss_aggregation="token_mean", policy_loss="cispo", clip_epsilon_high=1.1),
    dict(loss_aggregation="token_mean", kl_bias_correction=True),
    dict(loss_aggregation="token_sum_norm", clip_epsilon_high=0.28, beta=0.0),
]


@pytest.mark.parametrize("config", CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_loss_and_metrics_equal_the_float64_reference(config):
    raw = make_record(seed=5, groups=3, size=5, lengths=(2, 30), drift=0.4, **config)
    expected = reference(raw)
    got = recompute(parse_record(raw))
    assert got.loss == pytest.approx(expected["loss"], rel=1e-12, abs=1e-15)
    for key, value in expected.items():
        if value is not None and key != "loss":
            assert got.metrics[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert any(got.metrics.get(k, 0) > 0 for k in ("clip_ratio/region_mean", "cispo_clip_ratio")), \
        "a case where nothing clips proves nothing about the clip"


GRADIENT_CASES = [c for c in CASES if c.get("policy_loss") != "cispo"]


@pytest.mark.parametrize("config", GRADIENT_CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_gradient_equals_central_differences_of_the_reference(config):
    raw = make_record(seed=6, groups=2, size=4, lengths=(2, 9), drift=0.4, **config)
    got = recompute(parse_record(raw))
    h = 1e-6
    checked = 0
    for k, c in enumerate(got.completions):
        base = np.asarray(raw["groups"][c.group]["completions"][c.index]["logprobs"], float)
        for t in range(0, len(base), 3):
            up, down = base.copy(), base.copy()
            up[t] += h
            down[t] -= h
            numeric = (reference(raw, {(c.group, c.index): up})["loss"]
                       - reference(raw, {(c.group, c.index): down})["loss"]) / (2 * h)
            assert c.grad[t] == pytest.approx(numeric, rel=1e-5, abs=1e-9), (k, t)
            checked += 1
    assert checked > 10


def test_cispo_gradient_holds_the_cap_constant():
    """TRL's CISPO term is −sg(min(ρ, ε_high))·A·log π: ∂/∂log π = −min(ρ, ε_high)·A, times the token's
    aggregation weight (a difference quotient would differentiate the cap too)."""
    raw = make_record(seed=6, groups=2, size=4, lengths=(2, 9), drift=0.4, loss_aggregation="token_mean",
                      policy_loss="cispo", clip_epsilon_high=1.1, beta=0.0)
    got = recompute(parse_record(raw))
    tokens = sum(len(c.logp) for c in got.completions)
    for c in got.completions:
        old = np.asarray(raw["groups"][c.group]["completions"][c.index]["old_logprobs"], float)
        rho = np.exp(c.logp - old)
        assert c.grad == pytest.approx(-np.minimum(rho, 1.1) * c.advantage / tokens, rel=1e-12, abs=1e-15)


def test_logged_values_are_checked_and_a_wrong_one_is_caught():
    raw = make_record(seed=7, loss_aggregation="token_mean")
    expected = reference(raw)
    raw["metrics"] = {"loss": expected["loss"] * (1 + 3e-8), "clip_ratio/region_mean": expected["clip_ratio/region_mean"],
                      "kl": expected["kl"] * 1.01, "grad_norm": 3.0}
    found = {c.key: c for c in checks(parse_record(raw), recompute(parse_record(raw)))}
    assert found["loss"].ok and found["loss"].rel < 1e-7
    assert found["clip_ratio/region_mean"].ok
    assert not found["kl"].ok and found["kl"].rel == pytest.approx(0.01 / 1.01, rel=1e-6)
    assert "grad_norm" not in found  # not a number the record lets the app compute


def test_the_frameworks_token_normalizer_replaces_the_records_token_count():
    raw = make_record(seed=8, loss_aggregation="token_mean")
    tokens = sum(len(c["token_ids"]) for g in raw["groups"] for c in g["completions"])
    plain = recompute(parse_record(raw)).loss
    raw["config"]["token_normalizer"] = 4.0 * tokens  # e.g. the record is a quarter of the generation batch
    assert recompute(parse_record(raw)).loss == pytest.approx(plain / 4, rel=1e-12)


def test_a_what_if_recomputes_advantages_from_rewards():
    from app.engine.grpo.params import Conventions

    record = parse_record(make_record(seed=9, groups=2, size=4))
    own = recompute(record)
    dr = recompute(record, Conventions(preset="dr_grpo", max_length=12))
    assert not own.advantages.tolist() == dr.advantages.tolist()
    for g in range(2):  # Dr. GRPO: r − mean(r), no std
        rows = [k for k, c in enumerate(dr.completions) if c.group == g]
        r = own.rewards[rows]
        assert dr.advantages[rows] == pytest.approx(r - r.mean(), abs=1e-12)
