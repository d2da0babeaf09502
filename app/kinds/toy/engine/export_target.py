"""The toy's model for the exporter: `python -m app.export --model toy_grpo`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.engine.export_target import ExportTarget

if TYPE_CHECKING:
    from torch import nn


def _toy_grpo() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.engine.grpo.head import DTYPE
    from app.kinds.toy.engine.model import ToyConfig, ToyGRPO

    model = ToyGRPO(ToyConfig()).to(dtype=DTYPE)
    x = torch.zeros(1, model.cfg.n_features, dtype=DTYPE)  # (1, F) one prompt
    actions = torch.arange(model.cfg.n_choices)  # (G,) one completion per choice
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=DTYPE)[: model.cfg.n_choices]  # (G,)
    return model, (x, actions, rewards)


TARGETS = (ExportTarget(
    name="toy_grpo",
    description="ToyGRPO (app/kinds/toy/engine/model.py), the GRPO objective of the default walkthrough",
    build=_toy_grpo,
    # forward returns a dict of every intermediate; the graph ends at the loss (via sub@ToyGRPO#0).
    select_output=lambda out: out["loss"],
    # As in the user's export: the ratio and the clip are each one Python statement.
    statement_modules=frozenset({"ratio", "clipped"}),
),)
