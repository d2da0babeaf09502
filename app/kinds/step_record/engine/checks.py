"""What the framework logged for the step, against what the app recomputed from the same tokens.

Every logged key is either checked, when the app can compute it (TRL's names, UNIPO's and verl's mapped
to them; docs/reference/step-record.md): the two numbers, their difference in the value's own units and
relative, why a small one is there, and, when they disagree, the likely causes, loudly; or listed as
not checked, with the reason (`unchecked`). The
relative difference of a number that cancels to about 0 (a GRPO loss of centred advantages at
ρ = 1) is measured against the size of its terms (`scale`), not against the tiny result: a float32
framework's 3e-9 and float64's 1e-17 are the same loss.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.step import Recomputed

TOLERANCE = 1e-6  # relative; the bar for a TRL record
FLOAT32_EPS = 1.2e-7


@dataclass(frozen=True)
class Check:
    key: str
    logged: float
    recomputed: float
    rel: float  # |recomputed − logged| / max(|logged|, floor)
    floor: float  # the scale a cancelling value is measured against (0: plain relative)
    dtype: str = "float32"  # the framework's log-prob dtype (the record's run.dtype)

    @property
    def ok(self) -> bool:
        return self.rel <= TOLERANCE

    @property
    def diff(self) -> float:
        """|recomputed − logged|, in the logged value's own units."""
        return abs(self.recomputed - self.logged)

    @property
    def plain_rel(self) -> float:
        """|recomputed − logged| / |logged|: the difference against the value itself."""
        return self.diff / abs(self.logged) if self.logged else (0.0 if self.diff == 0 else float("inf"))

    @property
    def rounding(self) -> tuple[str, float]:
        """The arithmetic whose rounding the difference is within: float64's when it is that small
        (the file's numbers were float64, summed in another order), else the record's dtype's."""
        if self.rel <= 64 * ROUNDING["float64"]:
            return "float64", ROUNDING["float64"]
        return self.dtype, ROUNDING.get(self.dtype, FLOAT32_EPS)

    @property
    def why(self) -> str:
        """Why a difference inside the tolerance is there at all, in words ("" when there is none)."""
        return re.sub(r"e-(\d)", r"e−\1", self._why())

    def _why(self) -> str:
        if self.diff == 0 or not self.ok:
            return ""
        dtype, eps = self.rounding
        times = "under one" if self.rel <= eps else f"{self.rel / eps:.2g}×"
        if self.floor and self.key.startswith("loss"):
            return (f"{dtype} rounding. The loss is a sum of per-token terms of both signs that cancel to a small "
                    f"number; each addition rounds by up to {eps:.1e} of the terms' size (Σ|w·term| = "
                    f"{self.floor:.4g}), not of the loss, so the difference is measured against {self.floor:.4g}: "
                    f"{self.rel:.1e} of it, {times} {dtype} rounding")
        if self.floor:
            return (f"{dtype} rounding of a share of tokens, measured against one token's share "
                    f"(1/{round(1 / self.floor):,}): {self.rel:.1e} of one token")
        return f"{dtype} rounding: {self.rel:.1e} of the value, {times} {dtype} rounding ({eps:.1e})"


@dataclass(frozen=True)
class Unchecked:
    """A logged key the app does not recompute, and why."""
    key: str
    logged: float | None
    reason: str


def _floor(key: str, result: Recomputed, record: StepRecord) -> float:
    if key == "loss":
        return result.scale
    if key.startswith("clip_ratio") or key == "cispo_clip_ratio":
        return 1.0 / max(record.token_count, 1)  # one token's flag
    if key == "advantage_mean":  # centred advantages cancel to about 0: against their size, as the loss
        return float(np.mean(np.abs(result.advantages)))
    return 0.0


ROUNDING = {"float32": FLOAT32_EPS, "bfloat16": 7.8e-3, "float16": 9.8e-4, "float64": 2.2e-16}

# Other names frameworks log the same number under, with its sign: TRL logs `policy_loss` beside
# `loss` only when an entropy bonus changes the loss (refused by the recorder); UNIPO logs
# `policy_loss` and `policy_objective` (= −loss) and no `loss`, `clip_fraction` (a token mean of the
# clip flags: TRL's region_mean) and `response_length` (the mean length); verl's names are below.
ALIASES: dict[str, tuple[str, float]] = {
    "policy_loss": ("loss", 1.0), "policy_objective": ("loss", -1.0),
    "clip_fraction": ("clip_ratio/region_mean", 1.0), "response_length": ("completions/mean_length", 1.0),
    "reward_mean": ("reward", 1.0),
    # verl (trainer/ppo/metric_utils.py compute_data_metrics): critic/score/mean is the mean sequence score
    "critic/score/mean": ("reward", 1.0), "response_length/mean": ("completions/mean_length", 1.0),
    "response_length/min": ("completions/min_length", 1.0), "response_length/max": ("completions/max_length", 1.0),
}
# Why a logged key is not recomputed, for the keys frameworks log that the record cannot give
NOT_COMPUTABLE = {
    "grad_norm": "‖∂loss/∂θ‖ over the model's weights: the record holds log-probs, not weights (this page shows "
                 "‖∂loss/∂log π‖ instead)",
    "actor/grad_norm": "‖∂loss/∂θ‖ over the model's weights: the record holds log-probs, not weights",
    "learning_rate": "the optimizer's setting for the step, not computed from its tokens",
    "actor/lr": "the optimizer's setting for the step, not computed from its tokens",
    "epoch": "a progress counter of the run", "step": "a progress counter of the run",
    "num_tokens": "a running count over the whole run (prompt tokens included)",
    "step_time": "wall-clock time", "train_runtime": "wall-clock time",
    "actor/ppo_kl": "verl's mean of log π_old − log π over tokens: a diagnostic, not a loss term; the app "
                    "shows the ratio itself",
    "actor/pg_clipfrac_lower": "verl's share of tokens where the dual clip binds: the app marks the dual clip in "
                               "the ratio window, it does not log it",
    "critic/rewards/mean": "verl's token-level rewards after a KL in the reward: the record holds the scores",
}


def _verl(record: StepRecord, key: str, value: float) -> tuple[str, float] | None:
    """A verl key as the app's metric: (app key, logged value in the app's terms)."""
    m, c = record.metrics, record.config
    if key == "actor/pg_loss":
        kl = m.get("actor/kl_loss") if c.beta > 0 else 0.0
        if kl is not None:
            return "loss", value + c.beta * float(kl)
    if key == "actor/pg_clipfrac" and c.importance_sampling_level == "token":
        return "clip_ratio/region_mean", value
    if key == "actor/kl_loss" and c.loss_aggregation == "token_mean":
        return "kl", value
    return None


def _label(app_key: str, key: str, record: StepRecord) -> str:
    if app_key == key:
        return key
    if key == "actor/pg_loss" and record.config.beta > 0:
        return f"{app_key} (logged as actor/pg_loss + β·actor/kl_loss)"
    return f"{app_key} (logged as {key})"


def _mapped(record: StepRecord, key: str, value: float) -> tuple[str, float] | None:
    if key in ALIASES:
        app_key, sign = ALIASES[key]
        return app_key, sign * value
    return _verl(record, key, value) if key.startswith("actor/") else (key, value)


def checks(record: StepRecord, result: Recomputed) -> list[Check]:
    """Every logged key the app recomputes, logged against recomputed (the record's order)."""
    out = []
    for key, raw in record.metrics.items():
        if raw is None:
            continue
        found = _mapped(record, key, float(raw))
        if found is None or found[0] not in result.metrics:
            continue
        app_key, logged = found
        mine = result.metrics[app_key]
        floor = _floor(app_key, result, record)
        denominator = max(abs(logged), floor)
        diff = abs(mine - logged)
        rel = 0.0 if diff == 0 else (diff / denominator if denominator > 0 else float("inf"))
        out.append(Check(_label(app_key, key, record), float(logged), mine, rel, floor, record.run.dtype))
    return out


def unchecked(record: StepRecord, result: Recomputed) -> list[Unchecked]:
    """Every logged key `checks` leaves out, with the reason."""
    out = []
    for key, raw in record.metrics.items():
        found = _mapped(record, key, float(raw)) if raw is not None else None
        if raw is not None and found is not None and found[0] in result.metrics:
            continue
        out.append(Unchecked(key, None if raw is None else float(raw), _reason(record, key, raw, found)))
    return out


def _reason(record: StepRecord, key: str, raw: float | None, found: tuple[str, float] | None) -> str:
    c = record.config
    if raw is None:
        return "logged as null (no value)"
    if key in NOT_COMPUTABLE:
        return NOT_COMPUTABLE[key]
    if key.startswith(("timing", "perf/", "time/")):
        return "wall-clock time or throughput"
    if key == "entropy" or key == "actor/entropy":
        return "the record holds no per-token entropy" if key == "entropy" else \
            "verl's entropy: the record holds no per-token entropy to average"
    if key == "kl" and c.beta == 0:
        return "β = 0: the loss has no KL term, so the app does not log one"
    if key == "actor/kl_loss":
        return (f"verl aggregates the KL as its loss ({c.loss_aggregation}); the app's kl is a token mean, so "
                "only a token_mean record's is compared" if c.beta > 0 else "β = 0: no KL term in the loss")
    if key == "actor/pg_clipfrac":
        return "verl's clip fraction at sequence level: the app compares it at token level only"
    if key == "actor/pg_loss":
        return "the KL part, actor/kl_loss, is not logged beside it, so the loss cannot be rebuilt"
    if key.startswith("clip_ratio") and c.policy_loss == "cispo":
        return "CISPO has no clip band: the app logs cispo_clip_ratio instead"
    if key == "cispo_clip_ratio":
        return "the record's policy_loss is clip, not CISPO"
    return "the app has no formula for this key from the record's tokens and rewards"


def likely_causes(record: StepRecord, failed: list[Check]) -> list[str]:
    """Why a recomputed value may differ from the logged one, most likely first."""
    if not failed:
        return []
    keys = {c.key for c in failed}
    causes = []
    if record.config.gradient_accumulation_steps > 1 and len(record.micro_batches()) == 1:
        causes.append(f"gradient accumulation ({record.config.gradient_accumulation_steps} micro-batches): "
                      "the framework logs the mean of its micro-batches' values; the record names no "
                      "micro_batch, so it is recomputed as one batch")
    if "loss" in keys and keys <= {"loss"}:
        causes.append("a convention the record does not name (the loss differs, the clip fractions and KL agree): "
                      "check loss_aggregation, token_normalizer and max_length against the framework's config")
    if keys & {"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}:
        causes.append("different clip bounds (clip_epsilon, clip_epsilon_high) or old log-probs from another policy")
    causes.append("a different batch: the metrics were logged over more completions than the record holds "
                  "(several devices, or steps averaged by logging_steps > 1)")
    if record.run.dtype in ("bfloat16", "float16"):
        causes.append(f"{record.run.dtype} log-probs: the framework's own rounding is larger than the tolerance")
    return causes
