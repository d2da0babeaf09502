"""What the tiny-LM walkthrough's recorded step hands to the views: plain Python numbers.

Per token and per completion everything the token views show; per node a summary of its
value and gradient (shape, range, norm). A node's full tensors are large ((G, L, 64) per
activation), so they stay in the engine and are read one node at a time (`TokenStepResult.node`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.runtime.records import NodeRecord
from app.kinds.tiny_lm.engine.token_params import TokenParams


@dataclass(frozen=True)
class TokenRecord:
    """One completion token. `grad` is ∂loss/∂log π_θ(token); `logp_after` is log π after one more step."""
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


@dataclass(frozen=True)
class TokenStepResult:
    params: TokenParams
    device: str
    prompt_text: str
    prompt_tokens: tuple[str, ...]
    prompt_script: str
    answer: int
    reward_parts: tuple[str, ...]
    completions: tuple[CompletionRecord, ...]
    objective: float
    loss: float
    policy_grad_norm: float
    aggregations: tuple[AggregationRow, ...]
    nodes: dict[str, TensorSummary]
    # node id -> its full value and gradient as Python lists, computed on request
    node_reader: Callable[[str], NodeRecord] = field(repr=False, compare=False, default=lambda _n: NodeRecord(
        None, None, None, None))
    # (block, completion, head) -> the attention weights over the completion's real tokens
    attention_reader: Callable[[int, int, int], list[list[float]]] = field(
        repr=False, compare=False, default=lambda *_: [])

    def node(self, node_id: str) -> NodeRecord:
        return self.node_reader(node_id)

    def attention(self, block: int, completion: int, head: int) -> list[list[float]]:
        return self.attention_reader(block, completion, head)

    @property
    def group_size(self) -> int:
        return len(self.completions)
