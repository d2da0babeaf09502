"""Two sets of conventions on the same samples: what changes, node by node.

Side A is a full request (its conventions also drive the history of earlier updates);
side B re-records the shown update on A's exact model state, group and rewards with B's
conventions. So every difference on screen comes from the loss conventions alone, never
from a different sample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from app.engine.grpo.params import Conventions
from app.engine.runtime.compute import cached_computation
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.step import record_grpo_step, replay, shown_model, step_result, with_conventions


@dataclass(frozen=True)
class GradChange:
    """‖∇a − ∇b‖ / ‖∇a‖ for one node; `relative` is None when ‖∇a‖ = 0 < ‖∇b‖ (unbounded)."""
    norm_a: float
    norm_b: float
    diff: float
    relative: float | None


@dataclass(frozen=True)
class Comparison:
    a: StepResult
    b: StepResult
    conventions_b: Conventions
    grad_change: dict[str, GradChange | None]  # None: the node has no gradient on either side


def flatten(values) -> list[float]:
    """A nested list of numbers (a recorded tensor) as one flat list."""
    if values is None:
        return []
    if isinstance(values, (int, float)):
        return [float(values)]
    return [v for item in values for v in flatten(item)]


def grad_change(grad_a, grad_b) -> GradChange | None:
    if grad_a is None and grad_b is None:
        return None
    a, b = flatten(grad_a), flatten(grad_b)
    a = a or [0.0] * len(b)
    b = b or [0.0] * len(a)
    norm_a = math.sqrt(math.fsum(v * v for v in a))
    norm_b = math.sqrt(math.fsum(v * v for v in b))
    diff = math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(a, b, strict=True)))
    if norm_a == 0.0:
        relative = 0.0 if diff == 0.0 else None
    else:
        relative = diff / norm_a
    return GradChange(norm_a, norm_b, diff, relative)


@cached_computation(maxsize=256, weight=lambda c: 2 + c.a.params.group_size // 32)
def compare_step(params: GRPOParams, conventions_b: Conventions, device: str = "cpu") -> Comparison:
    # One replay serves both sides: A is recorded on it (as the step page shows it, with its
    # step_clip_epsilon / step_beta), then B on a copy with B's conventions.
    model, prompt, x, actions, rewards = replay(params, device)
    model_a = shown_model(params, model)
    model_b = with_conventions(model, conventions_b)
    a = step_result(params, device, prompt, record_grpo_step(model_a, x, actions, rewards))
    params_b = GRPOParams(**{**params.model_dump(), **conventions_b.model_dump(),
                             "step_clip_epsilon": None, "step_beta": None})
    b = step_result(params_b, device, prompt, record_grpo_step(model_b, x, actions, rewards),
                    compared_on="side A's model state, group and rewards")
    changes = {node_id: grad_change(a.nodes[node_id].grad, b.nodes[node_id].grad) for node_id in a.nodes}
    for name, grads in a.parameter_grads.items():
        changes[name] = grad_change(grads["grad"], b.parameter_grads[name]["grad"])
    return Comparison(a, b, conventions_b, changes)
