"""The real model's GRPO objective for the exporter: `python -m app.export --model smollm_grpo`, and with
`--from FILE.gguf` the same objective on any GGUF file's configuration (`python -m app models add`).

The graph is the code's, not the weights': it is traced on a configuration (SmolLM2-135M-Instruct's own,
SMOLLM2_135M, the values its GGUF's metadata holds; or a file's, read by gguf_file.config_from_gguf) with
zeroed weights, so exporting needs neither the checkpoint nor a random init. A group of two ragged
completions of one prompt: the code path is the same for any group."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from app.engine.export_target import ExportTarget

if TYPE_CHECKING:
    from torch import nn

    from app.engine.lm.decoder import DecoderConfig


def smollm_grpo_on(cfg: DecoderConfig) -> tuple[nn.Module, tuple[Any, ...]]:
    """The objective on `cfg` with zeroed weights, and a group to trace it with."""
    import torch

    from app.engine.lm.decoder import Decoder
    from app.engine.lm.rope import rope_inverse_frequencies
    from app.engine.lm.scored import share_weights
    from app.kinds.smollm.engine.smollm_grpo import SmolLMGRPO

    # Built on the meta device, then given zeroed memory: three random inits of a 135M-parameter model take
    # ~8 s and the trace reads none of the values. The two frozen copies share the policy's zeros, as at a
    # live step, so a larger file's export holds one copy of its weights, not three.
    with torch.device("meta"):
        model = SmolLMGRPO(cfg)
    model.policy.to_empty(device="cpu")
    with torch.no_grad():
        for tensor in model.policy.parameters():
            tensor.zero_()
    policy = cast(Decoder, model.policy)
    if cfg.tie_embeddings:  # to_empty gives each tied name a tensor of its own: tie them again
        policy.lm_head.weight = policy.embed.weight
    for copy in (model.old_policy, model.reference_policy):
        share_weights(copy, model.policy)
    for copy in (model.policy, model.old_policy, model.reference_policy):
        copy.inverse_frequencies = rope_inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_freq_factors)
    prompt, completions = [1, 2, 3, 4], [[5, 6, 7], [8, 9]]
    width = max(len(c) for c in completions)
    ids = torch.tensor([prompt + c + [0] * (width - len(c)) for c in completions])
    mask = torch.tensor([[1.0] * len(c) + [0.0] * (width - len(c)) for c in completions])
    return model, (ids, mask, torch.tensor([1.0, 0.0]), len(prompt))


def _smollm_grpo() -> tuple[nn.Module, tuple[Any, ...]]:
    from app.kinds.smollm.engine.model_config import SMOLLM2_135M

    return smollm_grpo_on(SMOLLM2_135M)


def _from_gguf(path: Path) -> tuple[nn.Module, tuple[Any, ...]]:
    from gguf import GGUFReader

    from app.engine.lm.gguf_file import config_from_gguf

    return smollm_grpo_on(config_from_gguf(GGUFReader(path)))


TARGETS = (
    ExportTarget(
        name="smollm_grpo",
        description="token-level GRPO around SmolLM2-135M-Instruct (app/engine/lm/decoder.py, 30 blocks): "
                    "the real-model walkthrough; with --from FILE.gguf, around that Llama or Qwen file's model",
        build=_smollm_grpo,
        select_output=lambda out: out["loss"],
        statement_modules=frozenset({"ratio", "clipped"}),
        from_file=_from_gguf,
    ),
)
