"""Whether the app's advantages from the rewards match the framework's, and when they do not, which
advantage convention does: each std (sample, population, none) with each common ε (the record's,
none, TRL's 1e-4, verl's 1e-6, 1e-8) is computed from the record's rewards, and the closest is the
likely cause. A file that names no ε (UNIPO) gets the reader's assumption; this says whether the
file's own numbers bear it out, by computing, never by the framework's name.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.engine.grpo.params import Conventions
from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.step import Recomputed, group_advantages

TOLERANCE = 1e-6  # |ΔA| / max(1, |A|): a float32 framework's advantages are within ~1e-7
EPSILONS = (0.0, 1e-4, 1e-6, 1e-8)
STDS = ("sample", "population", "none")


def advantage_gap(recorded: float, from_rewards: float) -> float:
    """|ΔA| against max(1, |A|): an advantage near 0 is measured against the unit of A."""
    return abs(recorded - from_rewards) / max(1.0, abs(recorded))


@dataclass(frozen=True)
class AdvantageFit:
    mismatched: int  # completions whose A from r differs from the recorded A
    total: int
    max_diff: float  # the largest |ΔA|, in A's units
    max_rel: float  # its |ΔA| / |A|
    assumed_std: str
    assumed_epsilon: float
    assumed_note: bool  # the reader assumed the ε (the record's note says so): not the file's own
    best_std: str | None  # the convention that reproduces the file's A, None: none does
    best_epsilon: float | None
    best_gap: float

    @property
    def switch(self) -> dict[str, str] | None:
        """The what-if fields that recompute the step under the matching convention."""
        if self.best_std is None or self.best_epsilon is None:
            return None
        out = {}
        if self.best_std != self.assumed_std:
            out["advantage_std"] = self.best_std
        if self.best_std != "none" and self.best_epsilon != self.assumed_epsilon:
            out["advantage_epsilon"] = f"{self.best_epsilon:g}"
        return out or None


def _worst(recorded: np.ndarray, got: np.ndarray) -> float:
    gaps = np.abs(recorded - got) / np.maximum(1.0, np.abs(recorded))
    return float(gaps.max()) if gaps.size else 0.0


def advantage_fit(record: StepRecord, own: Recomputed, shown: Recomputed | None = None) -> AdvantageFit:
    """The recorded A against A from r under `shown`'s conventions (a what-if's, else the record's);
    the best fit is searched from the record's own conventions."""
    recorded = np.asarray(own.advantages, dtype=np.float64)
    got = np.asarray((shown or own).advantages_from_rewards, dtype=np.float64)
    gaps = np.abs(recorded - got) / np.maximum(1.0, np.abs(recorded))
    bad = gaps > TOLERANCE
    diffs = np.abs(recorded - got)
    k = int(diffs.argmax()) if diffs.size else 0
    c = (shown or own).conventions
    base = own.conventions
    best: tuple[float, str | None, float | None] = (float("inf"), None, None)
    for std in (base.advantage_std, *[s for s in STDS if s != base.advantage_std]):
        for eps in ((base.advantage_epsilon,) + tuple(e for e in EPSILONS if e != base.advantage_epsilon)
                    if std != "none" else (base.advantage_epsilon,)):
            trial = base.model_copy(update={"advantage_std": std, "advantage_epsilon": eps})
            gap = _worst(recorded, group_advantages(record, own.rewards, Conventions(**trial.model_dump())))
            if gap < best[0] - 1e-15:  # ties keep the earlier: the record's own first, then fewer changes
                best = (gap, std, eps)
    fits = best[0] <= TOLERANCE
    note = record.run.note
    return AdvantageFit(int(bad.sum()), len(recorded), float(diffs[k]) if diffs.size else 0.0,
                        float(diffs[k] / abs(recorded[k])) if diffs.size and recorded[k] else 0.0,
                        c.advantage_std, c.advantage_epsilon,
                        "assumed" in note and "advantage_epsilon" in note,
                        best[1] if fits else None, best[2] if fits else None, best[0])
