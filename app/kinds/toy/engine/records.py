"""What a recorded run hands to the layers above: per-node tensors as plain Python values."""
from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.grpo.params import Conventions
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
    conventions: Conventions | None = None  # what the objective was computed with


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
    # The conventions the shown update's objective used: params' with step_clip_epsilon / step_beta
    # (GRPOParams.shown_conventions); None where nothing overrides them (a stage's step).
    shown_conventions: Conventions | None = None

    @property
    def conventions(self) -> Conventions:
        """The shown update's conventions: read ε, ε_high and β here, not from params (the history's)."""
        return self.shown_conventions if self.shown_conventions is not None else self.params.conventions()
