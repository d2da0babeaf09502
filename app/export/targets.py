"""The models `python -m app.export --model NAME` knows: each with example inputs and choices.

A target is any nn.Module with inputs that run it once; the trace needs no weights that
mean anything (values are not exported), only the shapes and the code path.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads only when a model is built: the CLI's --help stays instant
    from torch import nn


@dataclass(frozen=True)
class ExportTarget:
    name: str
    description: str
    build: Callable[[], tuple[nn.Module, tuple[Any, ...]]]  # the model and example inputs for one forward pass
    select_output: Callable[[Any], Any] = lambda out: out  # which part of forward's result is the Output node's
    statement_modules: frozenset[str] = frozenset()  # modules drawn with one `Python` statement member


def _toy_grpo() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.engine.grpo.head import DTYPE
    from app.kinds.toy.engine.model import ToyConfig, ToyGRPO

    model = ToyGRPO(ToyConfig()).to(dtype=DTYPE)
    x = torch.zeros(1, model.cfg.n_features, dtype=DTYPE)  # (1, F) one prompt
    actions = torch.arange(model.cfg.n_choices)  # (G,) one completion per choice
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=DTYPE)[: model.cfg.n_choices]  # (G,)
    return model, (x, actions, rewards)


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


def _step_record() -> tuple[nn.Module, tuple[Any, ...]]:
    import torch

    from app.kinds.step_record.engine.head_model import RecordedGRPO

    # Two ragged completions of one prompt, as log-probs: the code path is the same for any record.
    logp = torch.tensor([[-0.5, -1.0, -0.2], [-0.7, -0.1, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    return RecordedGRPO().to(torch.float64), (logp, logp - 0.1, logp - 0.2, torch.tensor([1.0, 0.0],
                                                                                       dtype=torch.float64), mask)


TARGETS = {
    "toy_grpo": ExportTarget(
        name="toy_grpo",
        description="ToyGRPO (app/engine/model.py), the GRPO objective of the default walkthrough",
        build=_toy_grpo,
        # forward returns a dict of every intermediate; the graph ends at the loss (via sub@ToyGRPO#0).
        select_output=lambda out: out["loss"],
        # As in the user's export: the ratio and the clip are each one Python statement.
        statement_modules=frozenset({"ratio", "clipped"}),
    ),
    "tiny_lm": ExportTarget(
        name="tiny_lm",
        description="the tiny decoder-only LM of issue 13 (app/engine/tiny_lm.py): token ids to next-token logits",
        build=_tiny_lm,
    ),
    "tiny_lm_grpo": ExportTarget(
        name="tiny_lm_grpo",
        description="token-level GRPO around the tiny LM (app/engine/tiny_lm_grpo.py), the tiny-LM walkthrough",
        build=_tiny_lm_grpo,
        select_output=lambda out: out["loss"],
        statement_modules=frozenset({"ratio", "clipped"}),
    ),
    "step_record": ExportTarget(
        name="step_record",
        description="the GRPO head of a recorded step (app/kinds/step_record/engine/head_model.py): the "
                    "recorded model as one node, then advantages, ratio, clip, KL, aggregation and loss",
        build=_step_record,
        select_output=lambda out: out["loss"],
        statement_modules=frozenset({"ratio", "clipped"}),
    ),
}
