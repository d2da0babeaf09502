"""What the real model's recorded step (engine/step.py) hands a page: plain Python numbers, small enough
to ship (no torch here, so views may read it).

A node of the real model is large ((G, L, 576) per activation, (G, L, 49,152) for the logits, 1,825 nodes
over the three copies), so nodes come in two sizes:
- the head (every node outside the three Llamas, and each copy's `token_logprobs`): the full values
  and gradients ((G, T), (G,) or scalars), as the tiny LM ships them;
- every node inside a copy (norms, q/k/v/o, rope, the attention's matmuls and softmax, the MLP's parts,
  the residual adds, the copies' embed/norm/lm_head): per token, the L2 norm over the width of its
  value and of ∂loss/∂node, and the 5 widest dimensions by mean |value| over the real positions.
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

from app.engine.grpo.params import Conventions  # torch-free: pydantic and the presets only
from app.engine.grpo.token_records import TensorSummary, TokenRecord

Nested = list  # nested lists of floats (or ints for token ids)


@dataclass(frozen=True)
class HeadNode:
    node_id: str
    shape: tuple[int, ...]
    dtype: str
    values: Nested | float
    grad: Nested | float | None  # ∂loss/∂node, None where no gradient reaches it
    no_grad_reason: str | None


@dataclass(frozen=True)
class Rows(Sequence[tuple[float, ...]]):
    """A (rows, width) table of floats as one flat array('d'): a WideNode's per-token norms. The job codec
    stores an array as a slice of its pool and reads it back without making a Python float, so a page
    pays for the rows of the nodes it shows, not for ~2.6 million numbers of 1,825 nodes (the result's
    read: 0.19 s as tuples, see app/engine/jobs/codec.py). Reads as the tuple of row tuples it replaces."""
    flat: array
    width: int

    @classmethod
    def of(cls, rows: Sequence[Sequence[float]]) -> Rows:
        width = len(rows[0]) if rows else 0
        if any(len(row) != width for row in rows):
            raise ValueError("rows of unequal length")
        return cls(array("d", [v for row in rows for v in row]), width)

    def __len__(self) -> int:
        return len(self.flat) // self.width if self.width else 0

    @overload
    def __getitem__(self, index: int) -> tuple[float, ...]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[float, ...], ...]: ...

    def __getitem__(self, index: int | slice) -> tuple[float, ...] | tuple[tuple[float, ...], ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        n = len(self)
        if not -n <= index < n:
            raise IndexError(index)
        start = (index % n) * self.width
        return tuple(self.flat[start:start + self.width])

    def tolist(self) -> list[list[float]]:
        return [list(row) for row in self]


@dataclass(frozen=True)
class WideNode:
    """A node with a token axis: `token_axis` of `shape` (1 for (G, L, W), 2 for (G, H, L, ·)); the width
    is every other axis after the first, flattened (`top_dims` index that flattening)."""
    node_id: str
    shape: tuple[int, ...]
    token_axis: int
    value_norm: Rows  # (G, L): ‖value‖₂ over the width, per position
    grad_norm: Rows | None  # (G, L): ‖∂loss/∂node‖₂ over the width; None: frozen/data
    top_dims: tuple[tuple[int, float], ...]  # (flat width index, mean |value| over the real positions), 5 largest
    summary: TensorSummary


@dataclass(frozen=True)
class TokenMove:
    """One completion token's log-prob before and after one more AdamW step of the recorded loss."""
    completion: int
    position: int  # index among the completion's tokens
    token: str
    logp_before: float
    logp_after: float

    @property
    def delta(self) -> float:
        return self.logp_after - self.logp_before


@dataclass(frozen=True)
class SmolCompletion:
    text: str  # decoded, special tokens dropped
    token_ids: tuple[int, ...]  # the real tokens, the closing <|im_end|> included when it came
    tokens: tuple[TokenRecord, ...]  # per token: log π, ρ, KL, ∂loss/∂log π and its parts, log π after
    reward_parts: dict[str, float]  # each named rule's value (domain/tasks.py)
    reward: float  # the parts added
    reward_used: float  # r, or r − β·Σ KL(π_old) with the KL in the reward
    advantage: float
    stopped: bool  # ended with <|im_end|> (else cut at max_new_tokens)

    @property
    def length(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class SmolStepResult:
    params: Conventions  # the SmolParams the step ran with (typed by its base: no torch here)
    device: str
    dtype: str
    task_name: str
    prompt_text: str  # the user's message
    prompt_tokens: tuple[str, ...]  # the chat-formatted prompt, token by token
    reward_rules: dict[str, str]  # part name -> the plain sentence of what it pays
    completions: tuple[SmolCompletion, ...]
    objective: float
    loss: float
    loss_surrogate: float  # the loss's two addends (engine/grpo/gradient_parts.py): surrogate + KL = loss
    loss_kl: float
    head: dict[str, HeadNode]
    wide: dict[str, WideNode]
    attention_block: int
    # per completion, (H, n, n): block `attention_block`'s weights over the n positions the policy scored
    attention: tuple[Nested, ...]
    block_grad_norms: tuple[float, ...]  # per block of the policy: sqrt(Σ over its parameters ‖∂loss/∂W‖²)
    other_grad_norms: dict[str, float]  # the embedding (tied to the LM head) and the final norm
    policy_grad_norm: float
    moved: tuple[TokenMove, ...]  # the 10 completion tokens whose log π moved most in the recorded step's update
    stage_seconds: dict[str, float]
    rss_before_mb: float | None
    peak_rss_mb: float | None  # the process's high-water mark after the step (ru_maxrss)
    ids: Nested = field(repr=False, default_factory=list)  # (G, P + T): the prompt, then each completion
    mask: Nested = field(repr=False, default_factory=list)  # (G, T) 1 on real completion tokens
    prompt_length: int = 0
    # every log-prob of the step is log-softmax(logits / this): the sampling temperature (TRL's convention)
    logprob_temperature: float = 1.0
    # ‖∂loss/∂θ‖ of the recorded step before and after clipping to params.max_grad_norm (clip_grad_norm_'s
    # figure, as transformers' Trainer logs `grad_norm`; after: float64 over the clipped gradient)
    grad_norm_before_clip: float = 0.0
    grad_norm_after_clip: float = 0.0
    earlier_grad_norms: tuple[float, ...] = ()  # the μ − 1 earlier iterations' gradient norms, before clipping

    @property
    def group_size(self) -> int:
        return len(self.completions)

    @property
    def rewards(self) -> tuple[float, ...]:
        return tuple(c.reward for c in self.completions)
