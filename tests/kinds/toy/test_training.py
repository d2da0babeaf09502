"""app/engine/training.py against torch.optim.SGD itself: the same parameters, bit for bit."""
from __future__ import annotations

import copy

import pytest
import torch

from app.engine.grpo.head import DTYPE
from app.engine.runtime.training import SGD
from app.kinds.toy.engine.model import CompletionPolicy, ToyConfig


def _loss(policy: torch.nn.Module, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.nll_loss(policy(x), targets)


@pytest.mark.parametrize("bottleneck", [None, 1])
@pytest.mark.parametrize("lr", [0.3, 0.5, 1e-3, 7.0])
def test_every_step_equals_torch_optim_sgd(bottleneck, lr):
    gen = torch.Generator().manual_seed(7)
    ours = CompletionPolicy(ToyConfig(), bottleneck=bottleneck).to(DTYPE)
    for p in ours.parameters():
        p.data = torch.randn(p.shape, generator=gen, dtype=DTYPE)
    theirs = copy.deepcopy(ours)
    x = torch.randn(6, 3, generator=gen, dtype=DTYPE)
    targets = torch.randint(0, 4, (6,), generator=gen)
    mine, reference = SGD(ours, lr), torch.optim.SGD(theirs.parameters(), lr=lr)
    for _ in range(25):
        mine.descend(_loss(ours, x, targets))
        reference.zero_grad(set_to_none=True)
        _loss(theirs, x, targets).backward()
        reference.step()
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            assert torch.equal(a, b)  # exactly, not approximately
            assert torch.equal(a.grad, b.grad)


def test_gradients_are_fresh_each_step():
    policy = CompletionPolicy(ToyConfig()).to(DTYPE)
    x, targets = torch.ones(1, 3, dtype=DTYPE), torch.tensor([2])
    sgd = SGD(policy, 0.1)
    sgd.descend(_loss(policy, x, targets))
    probe = copy.deepcopy(policy)  # the gradient at the current point, computed alone
    for q in probe.parameters():
        q.grad = None
    _loss(probe, x, targets).backward()
    sgd.descend(_loss(policy, x, targets))
    for p, q in zip(policy.parameters(), probe.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)  # not accumulated onto the previous step's gradient
