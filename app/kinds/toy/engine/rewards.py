"""Reward tensors from the domain's reward components (docs/design.md §4)."""
from __future__ import annotations

import torch

from app.engine.grpo.head import DTYPE
from app.kinds.toy.domain.rewards import role_rewards
from app.kinds.toy.domain.toy_task import TOY_PROMPTS, ToyPrompt

_TABLES: dict[tuple[str, ...], torch.Tensor] = {}  # components -> (P, C), filled lazily


def reward_table(components: tuple[str, ...], prompt: ToyPrompt) -> torch.Tensor:
    """(C,) reward of each choice of this prompt."""
    per_role = role_rewards(components)
    return torch.tensor([per_role[prompt.role(c)] for c in range(4)], dtype=DTYPE)


def rewards_for(components: tuple[str, ...]) -> torch.Tensor:
    """(P, C) reward of every choice of every toy prompt under these components."""
    if components not in _TABLES:
        _TABLES[components] = torch.stack([reward_table(components, p) for p in TOY_PROMPTS])
    return _TABLES[components]


def accuracy_reward(actions: torch.Tensor, prompt: ToyPrompt) -> torch.Tensor:
    """Rule-based reward, as in R1-Zero's accuracy reward: 1 for the correct choice."""
    return (actions == prompt.correct).to(DTYPE)
