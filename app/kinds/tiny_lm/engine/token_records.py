"""What the tiny-LM walkthrough's recorded step hands to the views: plain Python numbers (the
per-token records are the shared ones of app/engine/grpo/token_records.py).

Per token and per completion everything the token views show; per node a summary of its
value and gradient (shape, range, norm). A node's full tensors are large ((G, L, 64) per
activation), so they stay in the engine and are read one node at a time (`TokenStepResult.node`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.grpo.token_records import AggregationRow, CompletionRecord, TensorSummary
from app.engine.runtime.records import NodeRecord
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.update_parts import UpdatePart


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
    # per completion, per token: the KL term's part of ∂loss/∂log π (the rest is the surrogate's)
    grad_kl: tuple[tuple[float, ...], ...] = ()
    # per completion: its Σ Δ log π under the update on parts of the loss (engine/update_parts.py)
    update_parts: tuple[UpdatePart, ...] = ()

    def node(self, node_id: str) -> NodeRecord:
        return self.node_reader(node_id)

    def attention(self, block: int, completion: int, head: int) -> list[list[float]]:
        return self.attention_reader(block, completion, head)

    @property
    def group_size(self) -> int:
        return len(self.completions)
