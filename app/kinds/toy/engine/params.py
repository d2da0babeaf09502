"""The toy walkthrough's parameters: one GRPO update of ToyGRPO, on top of the shared loss
conventions (app/engine/grpo/params.py)."""
from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from app.engine.grpo.params import Conventions
from app.engine.grpo.presets import PRESETS
from app.kinds.toy.domain.toy_task import TOY_PROMPTS

MAX_GROUP_SIZE = 4096
MAX_ITERATION = 50
MAX_INNER_STEPS = 16
MAX_ABS_REWARD = 1e6

# Defaults chosen so one view shows every phenomenon the walkthrough talks
# about (checked by tests/kinds/toy/test_engine.py::test_defaults_show_every_phenomenon):
# rewards that differ in the group, rho != 1 with clip-active samples, D > 0.
DEFAULT_SEED = 10
DEFAULT_GROUP_SIZE = 8
# The shown update's own ε and β (set by the figure's controls), and the history's field each stands in for.
STEP_OVERRIDES = {"step_clip_epsilon": "clip_epsilon", "step_beta": "beta"}


class GRPOParams(Conventions):
    """One GRPO update to show: the policy has already run `iteration` earlier
    iterations of `inner_steps` updates each, plus `inner_step` updates in the
    current one, all against a frozen old policy (DeepSeekMath Algorithm 1)."""

    seed: Annotated[int, Field(ge=0, le=2**31 - 1,
        description="Seeds the per-run torch.Generator used for sampling.")] = DEFAULT_SEED
    group_size: Annotated[int, Field(ge=2, le=MAX_GROUP_SIZE,
        description="G: completions sampled per prompt. Defaults to the length of `rewards` when that is given.",
    )] = DEFAULT_GROUP_SIZE
    learning_rate: Annotated[float, Field(gt=0, le=10, allow_inf_nan=False,
        description="Toy SGD step size of the policy updates.")] = 0.3
    iteration: Annotated[int, Field(ge=0, le=MAX_ITERATION,
        description="Earlier GRPO iterations already run; each re-freezes the old policy.")] = 2
    inner_steps: Annotated[int, Field(ge=1, le=MAX_INNER_STEPS,
        description="mu: policy updates per sampled group (old policy frozen meanwhile).")] = 4
    inner_step: Annotated[int, Field(ge=0, lt=MAX_INNER_STEPS,
        description="Updates already made in the current iteration, 0 <= inner_step < inner_steps.")] = 2
    prompt: Annotated[int, Field(ge=0, lt=len(TOY_PROMPTS), description="Which toy prompt the group answers.")] = 0
    rewards: Annotated[tuple[float, ...] | None, Field(
        description="Override of the current group's rewards: G comma-separated numbers.")] = None
    # The figure's controls (views/figure_control.py) set these, so that moving ε or β moves the clip
    # band or the KL part across the SAME group and ratios: the replayed history keeps the base values.
    step_clip_epsilon: Annotated[float | None, Field(gt=0, lt=1, allow_inf_nan=False,
        description="ε of the shown update only: the earlier updates keep clip_epsilon. The band's top "
                    "follows it unless clip_epsilon_high is set (by the URL or the preset). "
                    "Absent: clip_epsilon.")] = None
    step_beta: Annotated[float | None, Field(ge=0, le=10, allow_inf_nan=False,
        description="β of the shown update only: the earlier updates keep beta. Absent: beta.")] = None

    @field_validator("inner_step")
    @classmethod
    def _inner_step_below_inner_steps(cls, value, info):
        steps = info.data.get("inner_steps")
        if steps is not None and value >= steps:
            raise ValueError(f"must be < inner_steps ({steps}), got {value}")
        return value

    @field_validator("step_clip_epsilon", "step_beta")
    @classmethod
    def _no_override_when_equal(cls, value, info):
        # The shown update's value equal to the history's is no override: one canonical URL, one cache entry.
        base = info.data.get(STEP_OVERRIDES[str(info.field_name)])
        return None if value is not None and value == base else value

    def high_follows(self) -> bool:
        """The band's top follows ε: the URL does not set ε_high and the preset names none (DAPO's 0.28 does)."""
        return "clip_epsilon_high" not in self.url_overrides() and "clip_epsilon_high" not in PRESETS[self.preset]

    def shown_conventions(self) -> Conventions:
        """The conventions of the shown update: the history's, with step_clip_epsilon (and ε_high when it
        follows ε) and step_beta in place of theirs."""
        c = self.conventions()
        update: dict[str, float] = {}
        if self.step_clip_epsilon is not None:
            update["clip_epsilon"] = self.step_clip_epsilon
            if self.high_follows():
                update["clip_epsilon_high"] = self.step_clip_epsilon
        if self.step_beta is not None:
            update["beta"] = self.step_beta
        return c.model_copy(update=update) if update else c

    @field_validator("rewards", mode="before")
    @classmethod
    def _parse_rewards(cls, value):
        if value is None or value == "":
            return None
        if isinstance(value, str):
            try:
                value = [float(p) for p in value.split(",")]
            except ValueError:
                raise ValueError("must be comma-separated numbers, e.g. 1,0,0,1") from None
        values = tuple(float(v) for v in value)
        if not 2 <= len(values) <= MAX_GROUP_SIZE:
            raise ValueError(f"a group needs 2 to {MAX_GROUP_SIZE} rewards, got {len(values)}")
        if not all(math.isfinite(v) and abs(v) <= MAX_ABS_REWARD for v in values):
            raise ValueError(f"every reward must be a finite number with |r| <= {MAX_ABS_REWARD:g}")
        return values

    @field_validator("rewards")
    @classmethod
    def _one_reward_per_completion(cls, value, info):
        size = info.data.get("group_size")
        if value is not None and size is not None and len(value) != size:
            raise ValueError(f"must have group_size ({size}) values, got {len(value)}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _group_size_from_rewards(cls, data):
        # `?rewards=1,1,1,1` alone means a group of four: G follows the override.
        if isinstance(data, dict) and data.get("group_size") in (None, "") and data.get("rewards") not in (None, ""):
            rewards = data["rewards"]
            size = len(rewards.split(",")) if isinstance(rewards, str) else len(rewards)
            if 2 <= size <= MAX_GROUP_SIZE:  # otherwise the rewards validator names the problem
                data = {**data, "group_size": size}
        return data
