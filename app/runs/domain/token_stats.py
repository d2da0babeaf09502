"""One step's per-token numbers (issue 34): the train/inference mismatch, mask-aware, and where the gradient went.

**Mismatch.** For a trained token, d = log π_trainer − log π_rollout: the trainer recomputes the log-prob of a
token the inference engine (vLLM, SGLang) sampled, and the two differ (kernels, precision, a stale weight sync).
Only tokens the loss trains on count (loss_mask): prompt and tool tokens carry no sampling log-prob, which the
frameworks store as 0, so counting them reports "tens of nats" of mismatch that is not there (radixark/miles
had to fix exactly that). `mismatch_kl_mask_blind` is that wrong number, kept to say how wrong it is.
`mismatch_kl` is the k3 estimator exp(d) − d − 1 ≥ 0, prime-rl's `mismatch_kl`
(compute_importance_ratio_and_mismatch_kl).

**The IS band.** ρ = exp(d) is the importance weight that corrects rollout samples to the trainer's policy. The
token-level corrections truncate (TIS: min(ρ, C)) or mask (MIS) it outside [1/C, C], C = 2 by default in verl's
rollout correction, slime (#657) and ms-swift (rollout_importance_sampling_threshold): `outside_is_band` is the
share of trained tokens past it; `seq_outside_is_band` the share of sequences a sequence-level mask on the
geometric mean exp(mean d) would drop; `tis_weight_scale` = Σ|A|·min(ρ, C) / Σ|A| what truncated IS does to the
policy gradient's weight (1: nothing; the gradient of each token's term is scaled by its weight).

**Triage.** Of the trained tokens, the share that carries gradient: not advantage exactly 0 (a zero-variance
group, all G rewards equal, gives every token A = 0), not dropped by the framework's own mask (prime-rl's
`is_masked`). The three shares add to 1. Where the source's tokens are all response tokens (slime), the share
the loss mask removed (`loss_masked`: removed or masked-truncated samples) is said too; where it packs the prompt
in (prime-rl), the loss mask's zeros are mostly prompt and say nothing lost.

Accumulated one sequence at a time; a step's trained-token arrays are kept (8 bytes a token) for its quantiles.
"""
from __future__ import annotations

import math

import numpy as np

from app.runs.domain.token_exports import TokenSequence

IS_THRESHOLD = 2.0  # C: verl / slime / ms-swift's default rollout IS threshold; the band is [1/C, C]
PREFIX = "tokens/"
# what an IS correction does to the step's gradient (engine/is_effect.py computes them; a rule and the words read them)
IS_GRAD_METRIC = PREFIX + "is_grad/{mode}/{stat}"


class StepTokens:
    def __init__(self, response_only: bool) -> None:
        self.response_only = response_only
        self.sequences = 0
        self.tokens = 0
        self._d: list[np.ndarray] = []  # trained tokens' log-ratio
        self._adv: list[np.ndarray] = []
        self._blind: list[np.ndarray] = []  # k3 of every token with both log-probs finite
        self._entropy: list[np.ndarray] = []
        self._is_masked: list[np.ndarray] = []
        self._has_is_mask = False
        self._seq_geo: list[float] = []
        self._lengths: list[int] = []  # each sequence's trained tokens with a finite d, in order (is_effect.py)
        self.truncated: int | None = None
        self.nonfinite = 0

    def add(self, seq: TokenSequence) -> None:
        self.sequences += 1
        self.tokens += seq.loss_mask.size
        m = seq.loss_mask
        d_all = seq.trainer - seq.inference
        finite_all = np.isfinite(d_all)
        self._blind.append(np.expm1(d_all[finite_all]) - d_all[finite_all])
        d = d_all[m]
        finite = np.isfinite(d)
        self.nonfinite += int((~finite).sum())
        self._d.append(d[finite])
        self._adv.append(seq.advantages[m][finite])
        self._lengths.append(int(finite.sum()))
        if seq.entropy is not None:
            self._entropy.append(seq.entropy[m])
        if seq.is_masked is not None:
            self._has_is_mask = True
            self._is_masked.append(seq.is_masked[m][finite])
        else:
            self._is_masked.append(np.zeros(int(finite.sum()), dtype=bool))
        if finite.any():
            self._seq_geo.append(float(np.mean(d[finite])))
        if seq.truncated is not None:
            self.truncated = (self.truncated or 0) + int(seq.truncated)

    def trained(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step's trained tokens as kept: d, advantages (sequences back to back) and each sequence's count."""
        empty = np.zeros(0)
        d = np.concatenate(self._d) if self._d else empty
        adv = np.concatenate(self._adv) if self._adv else empty
        return d, adv, np.asarray(self._lengths, dtype=np.int64)

    def metrics(self) -> dict[str, float]:
        """The step's numbers, each under `tokens/`; a number with nothing to be computed from is left out."""
        d, adv = np.concatenate(self._d), np.concatenate(self._adv)
        blind = np.concatenate(self._blind)
        out: dict[str, float] = {"sequences": self.sequences, "trained_tokens": float(d.size),
                                 "nonfinite_logprobs": float(self.nonfinite)}
        if self.response_only:
            out["loss_masked"] = 1 - (d.size + self.nonfinite) / self.tokens if self.tokens else math.nan
        if self.truncated is not None:
            out["truncated"] = self.truncated / self.sequences
        if blind.size:
            out["mismatch_kl_mask_blind"] = float(blind.mean())
        if d.size:
            ratio = np.exp(d)
            lo, hi = 1 / IS_THRESHOLD, IS_THRESHOLD
            out |= {"mismatch_mean": float(d.mean()), "mismatch_abs_p99": float(np.percentile(np.abs(d), 99)),
                    "mismatch_abs_max": float(np.abs(d).max()), "mismatch_kl": float((np.expm1(d) - d).mean()),
                    "outside_is_band": float(((ratio < lo) | (ratio > hi)).mean())}
            geo = np.exp(np.array(self._seq_geo))
            out["seq_outside_is_band"] = float(((geo < lo) | (geo > hi)).mean())
            weight = np.abs(adv).sum()
            if weight > 0:
                out["tis_weight_scale"] = float((np.abs(adv) * np.minimum(ratio, hi)).sum() / weight)
            zero = adv == 0
            masked = np.concatenate(self._is_masked) & ~zero
            out["zero_advantage"] = float(zero.mean())
            if self._has_is_mask:
                out["is_masked"] = float(masked.mean())
            out["carry_gradient"] = float((~zero & ~masked).mean())
        if self._entropy:
            entropy = np.concatenate(self._entropy)
            entropy = entropy[np.isfinite(entropy)]
            if entropy.size:
                out["entropy_mean"] = float(entropy.mean())
        return {PREFIX + k: float(v) for k, v in out.items()}


__all__ = ["IS_GRAD_METRIC", "IS_THRESHOLD", "PREFIX", "StepTokens"]
