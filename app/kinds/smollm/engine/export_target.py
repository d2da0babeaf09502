"""The real model's GRPO objective for the exporter: `python -m app.export --model smollm_grpo`.

The graph is the code's, not the weights': it is traced on SmolLM2-135M-Instruct's own configuration
(the values the GGUF's metadata holds, SMOLLM2_135M) with zeroed weights, so exporting needs neither the
checkpoint nor a random init. A group of two ragged completions of one prompt: the code path
is the same for any group."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.engine.export_target import ExportTarget

if TYPE_CHECKING:
    from torch import nn


def _smollm_grpo() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.engine.lm.decoder import Decoder
    from app.engine.lm.rope import rope_inverse_frequencies
    from app.kinds.smollm.engine.model_config import SMOLLM2_135M
    from app.kinds.smollm.engine.smollm_grpo import SmolLMGRPO

    # Built on the meta device, then given zeroed memory: three random 135M-parameter inits take ~8 s
    # and the trace reads none of the values.
    with torch.device("meta"):
        model = SmolLMGRPO(SMOLLM2_135M)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for tensor in model.parameters():
            tensor.zero_()
        for lm in model.modules():
            if isinstance(lm, Decoder):
                lm.inverse_frequencies = rope_inverse_frequencies(lm.cfg.head_dim, lm.cfg.rope_theta)
    prompt, completions = [1, 2, 3, 4], [[5, 6, 7], [8, 9]]
    width = max(len(c) for c in completions)
    ids = torch.tensor([prompt + c + [0] * (width - len(c)) for c in completions])
    mask = torch.tensor([[1.0] * len(c) + [0.0] * (width - len(c)) for c in completions])
    return model, (ids, mask, torch.tensor([1.0, 0.0]), len(prompt))


TARGETS = (
    ExportTarget(
        name="smollm_grpo",
        description="token-level GRPO around SmolLM2-135M-Instruct (app/engine/lm/decoder.py, 30 blocks): "
                    "the real-model walkthrough",
        build=_smollm_grpo,
        select_output=lambda out: out["loss"],
        statement_modules=frozenset({"ratio", "clipped"}),
    ),
)
