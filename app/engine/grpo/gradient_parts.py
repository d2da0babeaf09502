"""∂loss/∂log π split into its two sources: the (clipped) policy-gradient surrogate and the KL penalty.

The loss is one aggregation of (L·IS weight − β·KL term) per token, and every aggregation
(objective.aggregate, or a record's global token count) is linear in its per-token input, so

    loss = −agg(L·IS weight) + agg(β·KL term) = surrogate part + KL part,

and by linearity of the derivative ∂loss/∂log π = ∂surrogate part/∂log π + ∂KL part/∂log π.
Each part is taken by autograd on the tensors of the loss's own forward pass (the same functions,
the same conventions), never by a re-typed formula; tests/grpo_reference.py derives both by hand.
A convention with no β term in the loss (β = 0, or the KL in the reward) has a KL part of 0.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossParts:
    surrogate: torch.Tensor  # scalar −agg(L·IS weight): the clipped-advantage term of the loss
    kl: torch.Tensor  # scalar agg(β·KL term): the reference penalty of the loss


def split_loss(policy_term: torch.Tensor, kl_term: torch.Tensor, beta: float,
               reduce: Callable[[torch.Tensor], torch.Tensor]) -> LossParts:
    """The loss's two addends under the aggregation `reduce` the loss itself uses
    (loss = −reduce(policy_term − β·kl_term))."""
    return LossParts(-reduce(policy_term), reduce(beta * kl_term))


def gradient_parts(parts: LossParts, logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(∂surrogate part/∂log π, ∂KL part/∂log π), shaped like `logp`, which must be on the parts'
    graph. The graph is kept (retain_graph), so the caller can still take the total's gradient.
    Beware: autograd.grad fires retain_grad() hooks too, so call this on a graph whose tensors
    keep no .grad, or before any are retained."""
    def grad(part: torch.Tensor) -> torch.Tensor:
        if not part.requires_grad:  # no path to log π (the KL in the reward: a constant of π_old)
            return torch.zeros_like(logp).detach()
        (g,) = torch.autograd.grad(part, logp, retain_graph=True, allow_unused=True)
        return torch.zeros_like(logp).detach() if g is None else g.detach()
    return grad(parts.surrogate), grad(parts.kl)
