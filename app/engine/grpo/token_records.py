"""A token-level GRPO group as plain Python numbers: per token, per completion, per node summary
and per aggregation. What any kind with completions of tokens hands the shared token view
(app/views/tokens/); the reward parts are DeepSeek-R1's (accuracy, format, language, §2.2-2.3).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenRecord:
    """One completion token. `grad` is ∂loss/∂log π_θ(token), split into its surrogate and KL parts;
    `logp_after` is log π after one more step."""
    text: str
    logp: float
    logp_old: float
    logp_ref: float
    ratio: float
    clip_active: bool
    dual_clip_hit: bool
    kl: float
    kl_term: float
    objective: float  # the token's L − β·kl_term
    weight: float  # w: the token's share of the loss under the aggregation in force
    grad: float
    logp_after: float
    grad_surrogate: float  # grad's part from the clipped advantage term (engine/grpo/gradient_parts.py)
    grad_kl: float  # grad's part from the KL penalty, β·∂KL/∂log π; grad = grad_surrogate + grad_kl

    @property
    def delta_logp(self) -> float:
        return self.logp_after - self.logp


@dataclass(frozen=True)
class CompletionRecord:
    text: str  # decoded, <end> included
    tokens: tuple[TokenRecord, ...]
    accuracy: float
    format: float
    language: float
    reward: float  # the parts that count, added
    reward_used: float  # r, or r − β·Σ KL(π_old) with the KL in the reward
    advantage: float
    contribution: float  # Σ_t w_t·(L − β·kl_term)_t: this completion's part of J
    weight_by_aggregation: dict[str, float]  # each token's weight under each aggregation (equal within a row)

    @property
    def length(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class TensorSummary:
    shape: tuple[int, ...]
    dtype: str
    value_min: float
    value_max: float
    value_mean: float
    value_norm: float
    grad_norm: float | None  # None: no gradient reaches this node
    grad_abs_max: float | None
    no_grad_reason: str | None


@dataclass(frozen=True)
class AggregationRow:
    mode: str
    loss: float
    grad_norm: float  # ‖∂loss/∂θ‖ over the policy's weights
    # Σ_t |∂loss/∂logp_t| per completion: how hard each completion is pushed under this mode
    push: tuple[float, ...]
