"""The one update rule of every training loop: plain SGD, p <- p - lr * grad.

It is torch.optim.SGD's rule without momentum, weight decay or dampening, written
once here instead of calling torch.optim: `Optimizer.step` imports torch._dynamo
on its first call (817 modules, +87 MB RSS per worker, +1.5 s on the first
request of every process), which this app never uses. The arithmetic is
torch.optim.SGD's own (`param.add_(grad, alpha=-lr)`, its single-tensor path), and
A kind's tests check that the two agree bit for bit.
"""
from __future__ import annotations

import torch
from torch import nn


class SGD:
    """Gradient descent over a module's parameters; one per training loop."""

    def __init__(self, module: nn.Module, lr: float) -> None:
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.lr = lr

    def descend(self, loss: torch.Tensor) -> None:
        """Fresh gradients of `loss`, then one step."""
        for p in self.params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in self.params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.lr)
