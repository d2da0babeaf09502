"""The step record's head for the exporter: `python -m app.export --model step_record`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.engine.export_target import ExportTarget

if TYPE_CHECKING:
    from torch import nn


def _step_record() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.kinds.step_record.engine.head_model import RecordedGRPO

    # Two ragged completions of one prompt, as log-probs: the code path is the same for any record.
    logp = torch.tensor([[-0.5, -1.0, -0.2], [-0.7, -0.1, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    return RecordedGRPO().to(torch.float64), (logp, logp - 0.1, logp - 0.2, torch.tensor([1.0, 0.0],
                                                                                       dtype=torch.float64), mask)


TARGETS = (ExportTarget(
    name="step_record",
    description="the GRPO head of a recorded step (app/kinds/step_record/engine/head_model.py): the "
                "recorded model as one node, then advantages, ratio, clip, KL, aggregation and loss",
    build=_step_record,
    select_output=lambda out: out["loss"],
    statement_modules=frozenset({"ratio", "clipped"}),
),)
