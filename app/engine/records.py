"""What a recorded run hands to the layers above: per-node tensors as plain Python values."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.toy_task import ToyPrompt
from .params import GRPOParams


@dataclass(frozen=True)
class NodeRecord:
    shape: tuple[int, ...] | None
    dtype: str | None
    values: list | float | None
    grad: list | float | None
    no_grad_reason: str | None = None
    # Set when the node takes no part in the computation shown (e.g. the clip
    # under an SFT stage): no numbers are invented for it.
    inactive_reason: str | None = None

    @classmethod
    def inactive(cls, reason: str) -> NodeRecord:
        return cls(None, None, None, None, None, reason)


@dataclass(frozen=True)
class RecordedStep:
    """One forward + backward of the GRPO loss, every node's value and grad kept."""
    samples: list[dict]
    objective: float
    loss: float
    nodes: dict[str, NodeRecord]
    parameter_grads: dict[str, dict]


@dataclass(frozen=True)
class StepResult:
    params: GRPOParams
    device: str
    prompt: ToyPrompt
    samples: list[dict]
    objective: float
    loss: float
    nodes: dict[str, NodeRecord]
    parameter_grads: dict[str, dict]
    history: dict = field(default_factory=dict)
    kind: str = "grpo"  # or "sft" / "rejection_sampling" for a process stage's step
