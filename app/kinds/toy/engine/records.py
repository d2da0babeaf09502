"""What a recorded run hands to the layers above: per-node tensors as plain Python values."""
from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.runtime.records import NodeRecord
from app.kinds.toy.domain.toy_task import ToyPrompt
from app.kinds.toy.engine.params import GRPOParams


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
