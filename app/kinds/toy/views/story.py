"""The toy walkthrough's story: what each of its four steps teaches, and the one figure that
proves it, drawn in the first view next to the sentence (docs/design.md, "The story").

The figure grows with the story: one group table whose columns appear as the steps introduce
them (rewards and advantages, then the ratio and the clip, then the KL term), with the step's
own chart beside it. Nothing is marked before it is explained: no ✂ before the clip step.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.toy.domain.rewards import COMPONENTS, role_rewards
from app.kinds.toy.domain.toy_task import ROLE_LABELS, ROLES
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.views.charts.advantages import AdvantageBars, advantage_bars
from app.kinds.toy.views.charts.clip_plot import ClipPlot, clip_plot
from app.kinds.toy.views.charts.gradient_parts import toy_parts_chart
from app.kinds.toy.views.charts.probabilities import ProbabilityBars, probability_bars
from app.kinds.toy.views.meaning import choice_label
from app.kinds.toy.views.sample_table import SampleTable, build_sample_table, choice_note
from app.views.charts.gradient_parts import PartsChart
from app.views.numbers import readout
from app.views.story import StepStory

# The toy export's step ids, in story order; a step the toy does not know reveals everything.
ORDER = ("policy", "advantages", "clip", "reference")
# The focus chart's width in SVG units: a 390 px phone's figure column holds 332 px, so the chart
# is drawn at most that wide and its 11-unit text is never scaled below 11 px there (app.css
# scales it down only on a narrower screen).
STORY_CHART_WIDTH = 330.0

STORIES = {
    "policy": StepStory(
        "GRPO samples a group of G answers from the frozen old policy, and learns only by comparing them "
        "with each other.",
        more="The policy gives each of the prompt's four answers a probability (the bars); the group is drawn "
             "from those probabilities, so a likelier answer turns up more often.",
        focus="policy", step_fields=("prompt", "seed", "group_size"),
        evidence="the old policy's four probabilities, and the group sampled from them"),
    "advantages": StepStory(
        "An answer's advantage is its reward minus the group's mean, divided by the group's spread.",
        more="The group is the baseline, so GRPO needs no critic; an all-equal group gives every answer 0 and "
             "teaches nothing.",
        focus="advantages", step_fields=("rewards", "group_size", "advantage_std"),
        evidence="the advantage bars and the r and A columns: above the line is pushed up, below down"),
    "clip": StepStory(
        "Once an answer's ratio leaves [1 − ε, 1 + ε] in the direction its advantage pushes, the clip binds "
        "and that answer stops giving gradient.",
        more="The ratio says how much more likely the updated policy makes an answer than the old policy did; "
             "inside the band, or moving against its advantage, an answer keeps its gradient.",
        focus="clip", form_open=True, step_fields=("clip_epsilon", "clip_epsilon_high", "dual_clip"),
        evidence="the clip chart (hollow markers: clipped) and the ρ, L and ∂loss/∂ρ columns"),
    "reference": StepStory(
        "A KL penalty, weighted by β, pulls the policy back toward the reference model, clipped or not.",
        more="Every answer's D enters the objective, so the KL term still moves an answer whose surrogate the "
             "clip has cut.",
        focus="reference", step_fields=("beta", "kl_estimator", "kl_placement"),
        evidence="the bars of ∂loss/∂log π split into its two parts (on a clipped row only the KL part is "
                 "left), the D column, and the objective L − βD differing from L on the clipped rows too"),
}


@dataclass(frozen=True)
class ChoiceKey:
    """What one of the prompt's answers stands for, and what the rule in force pays it."""
    choice: int
    meaning: str      # "mixed-language correct"
    reward: float | None  # None: unknown (an override, and no member of the group took it)
    note: str = ""    # where the meaning and the reward seem to disagree, why they do not


@dataclass(frozen=True)
class StoryFigure:
    focus: str
    stage: int                      # how far the story is: index into ORDER
    probabilities: ProbabilityBars | None
    advantages: AdvantageBars | None
    clip: ClipPlot | None
    parts: PartsChart | None        # the reference step's ∂loss/∂log π split into surrogate and KL parts
    table: SampleTable | None
    key: tuple[ChoiceKey, ...]      # the four answers of this prompt
    reward_rule: str
    group_text: str                 # "8 answers sampled: 2, 2, 3, …"
    all_equal: bool                 # every reward equal: every advantage 0


def stage_of(step_id: str) -> int:
    return ORDER.index(step_id) if step_id in ORDER else len(ORDER) - 1


def _choice_rewards(result: StepResult) -> dict[int, float]:
    paid: dict[int, float] = {}
    for s in result.samples:
        if isinstance(s.get("action"), int):
            paid.setdefault(s["action"], float(s["reward"]))
    return paid


def build_story_figure(result: StepResult | None, step_id: str) -> StoryFigure | None:
    """The focus figure of a toy step under a GRPO run; None for a training stage's SFT or
    filter step (its own panel shows it) or when nothing ran."""
    story = STORIES.get(step_id)
    if result is None or result.kind != "grpo" or story is None:
        return None
    stage = stage_of(step_id)
    prompt = result.prompt
    labels = [choice_label(prompt, s["action"]) if isinstance(s.get("action"), int) else "?" for s in result.samples]
    old = result.nodes.get("old_policy")
    row = old.values[0] if old is not None and isinstance(old.values, list) and old.values else None
    probabilities = probability_bars(row, prompt.correct, [choice_label(prompt, c) for c in range(len(row))],
                                     width=STORY_CHART_WIDTH) if stage == 0 and isinstance(row, list) else None
    rewards = [float(s["reward"]) for s in result.samples]
    advantages = advantage_bars([s["advantage"] for s in result.samples], rewards, None, labels,
                                width=STORY_CHART_WIDTH) if stage == 1 else None
    clip = clip_plot(result.conventions.clip_epsilon, result.samples, labels, width=STORY_CHART_WIDTH,
                     epsilon_high=result.conventions.clip_epsilon_high) if stage == 2 else None
    paid = _choice_rewards(result)
    rule = str(result.history.get("reward_rule", ""))
    parts = tuple(rule.split(" + "))
    if result.history.get("process") and all(p in COMPONENTS for p in parts):  # a stage's components
        paid = {c: role_rewards(parts)[prompt.role(c)] for c in range(len(ROLES))}
    elif result.params.rewards is None:  # the walkthrough's accuracy rule (engine/step.py's step_result)
        paid = {c: 1.0 if c == prompt.correct else 0.0 for c in range(len(ROLES))}
    known = list(paid.values()) or [0.0]
    key = tuple(ChoiceKey(c, ROLE_LABELS[prompt.role(c)], paid.get(c),
                          choice_note(prompt.role(c), paid[c], known) if c in paid else "")
                for c in range(len(ROLES)))
    shown = ", ".join(str(s["action"]) for s in result.samples[:16]) + (", …" if len(result.samples) > 16 else "")
    gradient_bars = toy_parts_chart(result) if step_id == "reference" else None
    return StoryFigure(
        story.focus, stage, probabilities, advantages, clip, gradient_bars,
        build_sample_table(result, upto=ORDER[stage]) if stage > 0 else None, key,
        str(result.history.get("reward_rule", "")), f"{len(result.samples)} answers sampled: {shown}",
        len(set(rewards)) <= 1)


def reward_text(value: float | None) -> str:
    return "not in this group" if value is None else readout(value)
