"""The one update rule of every training loop: plain SGD (torch.optim.SGD, no momentum).

A loop makes its optimizer once and calls `descend` per update: building an
optimizer costs more than the toy's whole step (~0.5 ms against ~0.3 ms).
"""
from __future__ import annotations

import torch
from torch import nn


def sgd(module: nn.Module, lr: float) -> torch.optim.SGD:
    """SGD over the module's parameters: p <- p - lr * grad, nothing else."""
    return torch.optim.SGD(module.parameters(), lr=lr)


def descend(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """Fresh gradients of `loss`, then one step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
