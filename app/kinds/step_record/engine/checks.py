"""What the framework logged for the step, against what the app recomputed from the same tokens.

Each check is one logged key the app can compute (TRL's names; docs/reference/step-record.md): the two
numbers, their relative difference, and, when they disagree, the likely causes, loudly. The
relative difference of a number that cancels to about 0 (a GRPO loss of centred advantages at
ρ = 1) is measured against the size of its terms (`scale`), not against the tiny result: a float32
framework's 3e-9 and float64's 1e-17 are the same loss.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.recompute import Recomputed

TOLERANCE = 1e-6  # relative; the bar for a TRL record
FLOAT32_EPS = 1.2e-7


@dataclass(frozen=True)
class Check:
    key: str
    logged: float
    recomputed: float
    rel: float  # |recomputed − logged| / max(|logged|, floor)
    floor: float  # the scale a cancelling value is measured against (0: plain relative)

    @property
    def ok(self) -> bool:
        return self.rel <= TOLERANCE


def _floor(key: str, result: Recomputed, record: StepRecord) -> float:
    if key == "loss":
        return result.scale
    if key.startswith("clip_ratio") or key == "cispo_clip_ratio":
        return 1.0 / max(record.token_count, 1)  # one token's flag
    return 0.0


# Other names frameworks log the same number under: TRL logs `policy_loss` beside `loss` only when an
# entropy bonus changes the loss (refused by the recorder); UNIPO logs `policy_loss` and
# `policy_objective` (= −loss) and no `loss`.
# verl logs actor/pg_loss (the policy term alone), actor/kl_loss (the KL aggregated as the loss is)
# and actor/pg_clipfrac (a token mean of the clip flags, so only at token level).
ALIASES = {"loss": (("policy_loss", 1.0), ("policy_objective", -1.0))}


def _verl(record: StepRecord, key: str) -> tuple[str, float] | None:
    m, c = record.metrics, record.config
    if key == "loss" and m.get("actor/pg_loss") is not None:
        kl = m.get("actor/kl_loss") if c.beta > 0 else 0.0
        if kl is not None:
            return "actor/pg_loss + β·actor/kl_loss", float(m["actor/pg_loss"]) + c.beta * float(kl)  # type: ignore[arg-type]
    if key == "clip_ratio/region_mean" and c.importance_sampling_level == "token" and \
            m.get("actor/pg_clipfrac") is not None:
        return "actor/pg_clipfrac", float(m["actor/pg_clipfrac"])  # type: ignore[arg-type]
    if key == "kl" and c.loss_aggregation == "token_mean" and m.get("actor/kl_loss") is not None:
        return "actor/kl_loss", float(m["actor/kl_loss"])  # type: ignore[arg-type]
    return None


def _logged(record: StepRecord, key: str) -> tuple[str, float] | None:
    if record.metrics.get(key) is not None:
        return key, float(record.metrics[key])  # type: ignore[arg-type]
    for name, sign in ALIASES.get(key, ()):
        if record.metrics.get(name) is not None:
            return name, sign * float(record.metrics[name])  # type: ignore[arg-type]
    return _verl(record, key)


def checks(record: StepRecord, result: Recomputed) -> list[Check]:
    out = []
    for key, mine in result.metrics.items():
        found = _logged(record, key)
        if found is None:
            continue
        name, logged = found
        floor = _floor(key, result, record)
        key = key if name == key else f"{key} (logged as {name})"
        denominator = max(abs(logged), floor)
        diff = abs(mine - logged)
        rel = 0.0 if diff == 0 else (diff / denominator if denominator > 0 else float("inf"))
        out.append(Check(key, float(logged), mine, rel, floor))
    return out


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
