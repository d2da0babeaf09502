"""What the real model's R1-Zero run (engine/r1_zero_run.py) hands a page: plain Python numbers per step,
a few kilobytes a step (no torch here, so views may read it)."""
from __future__ import annotations

from dataclasses import dataclass

from app.engine.grpo.params import Conventions  # torch-free: pydantic and the presets only


@dataclass(frozen=True)
class RunAnswer:
    text: str  # decoded, special tokens dropped
    reward: float
    advantage: float
    length: int  # tokens, <|im_end|> included when it came
    stopped: bool  # ended with <|im_end|> (else cut at max_new_tokens)


@dataclass(frozen=True)
class RunPoint:
    """One GRPO step of the run, measured on its group before its update."""
    step: int
    task_name: str  # the built-in prompt this step answered
    reward_mean: float
    part_means: dict[str, float]  # each named rule's mean over the group (accuracy, brevity)
    tied: bool  # every reward equal: every advantage 0, the step learns nothing from the rewards
    length_mean: float  # tokens per answer
    stopped_share: float  # answers that ended with <|im_end|>
    kl_mean: float  # the loss's KL estimate to the reference, per real token
    clip_share: float  # real tokens whose ratio was clipped (0 with num_iterations = 1: ρ = 1)
    loss: float
    grad_norm: float  # ‖∂loss/∂θ‖ over every policy parameter, before the AdamW step (no clipping)
    seconds: float
    answers: tuple[RunAnswer, ...]


@dataclass(frozen=True)
class SmolRunResult:
    params: Conventions  # the SmolRunParams it ran with (typed by its base: no torch here)
    device: str
    task_names: tuple[str, ...]  # the prompts in the order the steps take them
    points: tuple[RunPoint, ...]
    seconds: float  # the whole run, the checkpoint's load excluded
    load_seconds: float  # this process's load of the checkpoint (cached after the first run)
