"""What a training path's view shows, said at the top of the step's figure (issue 49).

With a path chosen, the step's figure draws the path's stage, not the walkthrough's own group: its
last update (a GRPO stage), its last supervised step, or the samples its filter kept. The reader is
told so first, in words a student without the paper can follow: which path, which update of how
many, whether the step's point still shows in that update and, where it cannot, why (a tied group
has every advantage 0 and nothing to clip; a stage that is not GRPO has no group at all). The way
back, the step without the path, is a link right there.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.toy.domain.process_spec import Process, Stage
from app.kinds.toy.domain.rewards import role_rewards
from app.kinds.toy.engine.records import StepResult
from app.views.numbers import readout

CANNOT = "the point of this step cannot show here"
# Where the step's point does show in the path's update: what the figure proves it with.
HOLDS = {
    "policy": "the bars are this update's old policy, and the group was sampled from it",
    "advantages": "the answers earned different rewards, so their advantages differ",
}


@dataclass(frozen=True)
class PathView:
    title: str        # "DeepSeek-R1-Zero's last update, training step 40 of 40"
    where: str        # "stage 1 of 1, “GRPO with rule rewards”; prompt 0, a group of 16 answers"
    point: str        # whether the step's point shows in it, and why not where it cannot
    holds: bool       # the step's point shows in the path's update
    back_url: str     # the step without the path: its own group


def _clipped(result: StepResult) -> int:
    return sum(1 for s in result.samples if s.get("clip_active"))


def _tied(result: StepResult, stage: Stage, step_id: str) -> str:
    """Why a group whose rewards all agree teaches nothing, and why that happens late in training."""
    rewards = {float(s["reward"]) for s in result.samples}
    reward = next(iter(rewards)) if rewards else 0.0
    n = len(result.samples)
    full = stage.reward and reward >= max(role_rewards(stage.reward).values())
    said = (f"all {n} answers in this group earned the full reward ({readout(reward)}): by its last update the "
            "policy has learned this prompt" if full else
            f"every answer in this group earned the same reward ({readout(reward)})")
    clip = " and nothing is clipped" if step_id in ("clip", "reference") else ""
    return f"{said[0].upper()}{said[1:]}, so every advantage is 0{clip}: {CANNOT}."


def _grpo_point(result: StepResult, stage: Stage, step_id: str) -> tuple[str, bool]:
    if len({float(s["reward"]) for s in result.samples}) <= 1 and step_id != "policy":
        return _tied(result, stage, step_id), False
    n, clipped = len(result.samples), _clipped(result)
    if step_id in ("clip", "reference") and not clipped:
        what = ("the clip never binds" if step_id == "clip"
                else "there is no clipped answer for the KL part to keep moving")
        return (f"No answer is clipped in this update (every ratio stayed inside the band [1 − ε, 1 + ε], or moved "
                f"against its advantage), so {what}: {CANNOT}."), False
    if step_id == "clip":
        return f"The point of this step shows here too: {clipped} of the {n} answers are clipped (✂).", True
    if step_id == "reference":
        return (f"The point of this step shows here too: {clipped} of the {n} answers are clipped (✂), and the KL "
                "part still moves them."), True
    if step_id in HOLDS:
        return f"The point of this step shows here too: {HOLDS[step_id]}.", True
    return "", True


def build_path_view(result: StepResult | None, step_id: str, process: Process, stage: Stage, iterations: int,
                    back_url: str) -> PathView:
    """`stage`: the stage shown (the path's last unless one is named); `iterations`: its training steps
    (0 for a filter); `back_url`: the step without the path."""
    index = process.stages.index(stage) + 1
    where = f"stage {index} of {len(process.stages)}, “{stage.title}”"
    if result is not None:
        where += f"; prompt {result.params.prompt}"
    if stage.kind == "rejection_sampling":
        title = f"{process.title}: the samples its filter kept"
        point = ("This stage only samples answers and keeps those every reward component pays; it takes no "
                 f"gradient step, so there is no group, advantage, ratio or clip: {CANNOT}.")
        return PathView(title, where, point, False, back_url)
    done = result.params.iteration + 1 if result is not None and result.kind == "grpo" else iterations
    title = f"{process.title}'s last update, training step {done} of {iterations}"
    if stage.kind != "grpo" or result is None or result.kind != "grpo":
        point = ("This stage fine-tunes on examples (cross-entropy), not GRPO: there is no group, advantage, "
                 f"ratio or clip, so {CANNOT}.")
        return PathView(title, where, point, False, back_url)
    where += f", a group of {len(result.samples)} answers"
    point, holds = _grpo_point(result, stage, step_id)
    return PathView(title, where, point, holds, back_url)
