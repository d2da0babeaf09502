"""Rule-based reward components of the toy, analogues of DeepSeek-R1's (§2.2.2, §2.3.2, §2.3.4).

Each component maps a choice's role (domain.toy_task) to a number; a stage's
reward is the sum of its components. The values are the toy's choice, not the
paper's: the paper gives no numeric weights (docs/design.md §4).
"""
from __future__ import annotations

from app.kinds.toy.domain.toy_task import ROLES

# role -> reward, per component
COMPONENTS: dict[str, dict[str, float]] = {
    # the final answer can be parsed and is right
    "accuracy": {"correct": 1.0, "mixed": 1.0, "unformatted": 0.0, "wrong": 0.0},
    # reasoning kept inside the <think>...</think> template
    "format": {"correct": 0.5, "mixed": 0.5, "unformatted": 0.0, "wrong": 0.5},
    # R1's language-consistency reward: the reasoning stays in one language
    "language": {"correct": 0.5, "mixed": 0.0, "unformatted": 0.5, "wrong": 0.5},
    # stands in for R1's helpfulness/harmlessness reward models in the final RL stage
    "preference": {"correct": 0.5, "mixed": 0.0, "unformatted": 0.0, "wrong": 0.0},
}

DESCRIPTIONS = {
    "accuracy": "1 when the final answer is right (readable or mixed-language choice)",
    "format": "0.5 when the choice keeps the <think>…</think> template",
    "language": "0.5 when the reasoning stays in one language",
    "preference": "0.5 from a fixed table that prefers the readable correct answer (toy reward model)",
}


def role_rewards(components: tuple[str, ...]) -> dict[str, float]:
    return {role: sum(COMPONENTS[c][role] for c in components) for role in ROLES}
