"""The one recorder of node values and gradients.

Forward hooks keep each named module's output and retain its gradient, so one
backward pass yields every node's value and d(loss)/d(output). Used for the
walkthrough's GRPO step and for every process stage's step alike.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from app.engine.runtime.records import NodeRecord


@contextmanager
def capture(modules: Mapping[str, nn.Module]) -> Iterator[dict[str, torch.Tensor]]:
    """While open, each module's output lands in the yielded dict under its node id."""
    outputs: dict[str, torch.Tensor] = {}

    def keep(node_id: str):
        def hook(_module, _inputs, out):
            if out.requires_grad:
                out.retain_grad()
            outputs[node_id] = out
        return hook

    handles = [module.register_forward_hook(keep(node_id)) for node_id, module in modules.items()]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


def as_python(t: torch.Tensor):
    return t.detach().cpu().tolist()


def node_record(node_id: str, t: torch.Tensor, no_grad_reasons: Mapping[str, str] | None = None) -> NodeRecord:
    """The node's value and gradient; where none flows, why, from the kind's own words
    (`no_grad_reasons`, keyed by the id's first part: a frozen copy, constant rewards)."""
    grad = t.grad if t.requires_grad else None
    reason = None
    if grad is None:
        root = node_id.split(".")[0]
        reason = (no_grad_reasons or {}).get(root, "no gradient flows to this tensor")
    return NodeRecord(tuple(t.shape), str(t.dtype).removeprefix("torch."), as_python(t),
                      None if grad is None else as_python(grad), reason)


def parameter_grads(policy: nn.Module) -> dict[str, dict]:
    return {f"policy.{name}": {"shape": list(p.shape), "values": as_python(p),
                               "grad": None if p.grad is None else as_python(p.grad)}
            for name, p in policy.named_parameters()}
