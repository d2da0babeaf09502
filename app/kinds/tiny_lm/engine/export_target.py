"""The tiny LM's models for the exporter: `python -m app.export --model tiny_lm|tiny_lm_grpo`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.engine.export_target import ExportTarget

if TYPE_CHECKING:
    from torch import nn


def _tiny_lm() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.kinds.tiny_lm.domain.arith_task import THINK, encode
    from app.kinds.tiny_lm.engine.tiny_lm import init_tiny_lm

    # One prompt and the first completion token: the trace needs the code path, not trained weights.
    return init_tiny_lm(0), (torch.tensor([encode("37+5=" + THINK)]),)


def _tiny_lm_grpo() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.kinds.tiny_lm.domain.arith_task import encode
    from app.kinds.tiny_lm.engine.tiny_lm_grpo import TinyLMGRPO

    # A group of two ragged completions of one prompt: the code path is the same for any group.
    prompt = encode("37+5=")
    done = [encode("<think>37+5</think><answer>42</answer><end>"), encode("<answer>42<end>")]
    width = max(len(d) for d in done)
    ids = torch.tensor([prompt + d + [0] * (width - len(d)) for d in done])
    mask = torch.tensor([[1.0] * len(d) + [0.0] * (width - len(d)) for d in done], dtype=torch.float64)
    model = TinyLMGRPO().to(torch.float64)
    return model, (ids, mask, torch.tensor([1.0, 0.0], dtype=torch.float64), len(prompt))


TARGETS = (
    ExportTarget(
        name="tiny_lm",
        description="the tiny decoder-only LM (app/kinds/tiny_lm/engine/tiny_lm.py): token ids to next-token logits",
        build=_tiny_lm,
    ),
    ExportTarget(
        name="tiny_lm_grpo",
        description="token-level GRPO around the tiny LM (app/kinds/tiny_lm/engine/tiny_lm_grpo.py), the tiny-LM "
                    "walkthrough",
        build=_tiny_lm_grpo,
        select_output=lambda out: out["loss"],
        statement_modules=frozenset({"ratio", "clipped"}),
    ),
)
