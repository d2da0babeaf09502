"""The real model's training-paths panel: R1-Zero's run (engine/r1_zero_run.py) as the job store has it,
its curves and what they say, and why R1 and distillation are not run on this model.

Every sentence is computed from the run's numbers, whichever way they went: a reward that did not
rise is said to have not risen. Steps cycle through the prompts, which differ in how often the model
gets them right, so a step's mean reward mostly says which prompt it was; the curve to read is the
mean over the last pass (one step per prompt), drawn beside it.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.training_paths import PATHS
from app.kinds.smollm.engine.run_records import RunPoint, SmolRunResult
from app.kinds.smollm.views.model_facts import SMOLLM2, ModelFacts
from app.stores.jobs import JobRecord
from app.views.charts.line_charts import LineChart, line_chart
from app.views.numbers import significant

WHY_NOT = {
    "r1": "R1 starts with supervised fine-tuning on long reasoning traces (a cold start, §2.3.1), then GRPO, "
          "then rejection sampling and SFT again, then GRPO once more: four stages of their own, each a run "
          "of this size or larger.",
    "distillation": "Distillation fine-tunes a small student on a large teacher's answers (§2.4): it needs the "
                    "teacher (R1 itself) to write them; this server has no model larger than this one.",
}


@dataclass(frozen=True)
class PathTab:
    id: str
    title: str
    url: str
    selected: bool
    runs_here: bool


@dataclass(frozen=True)
class PromptRow:
    name: str
    visits: int
    first: float  # mean reward at the prompt's first step
    last: float  # at its last step
    first_answer: str  # a first-step answer with the group's best reward
    last_answer: str


@dataclass(frozen=True)
class RunView:
    result: SmolRunResult
    charts: tuple[LineChart, ...]
    sentences: tuple[str, ...]  # the findings, each with its numbers
    prompts: tuple[PromptRow, ...]
    seconds_per_step: float


@dataclass(frozen=True)
class RunPanel:
    path: str  # the chosen path id
    tabs: tuple[PathTab, ...]
    job: JobRecord | None
    view: RunView | None
    start_url: str  # POST: start (or start again) the R1-Zero run
    poll_url: str | None  # GET while it is queued or running
    why_not: str | None  # for a path this model does not run
    tiny_lm_url: str
    steps: int
    group_size: int
    max_new_tokens: int
    seed: int = 0  # the page's seed: step s of the run samples with seed + s
    queue_place: int | None = None  # runs of this lane ahead of a queued one
    facts: ModelFacts = SMOLLM2  # the walkthrough's model (views/model_facts.py); the packaged one's by default

    @property
    def percent(self) -> int:
        job = self.job
        return int(100 * job.done / job.total) if job and job.total else 0


def _window_means(values: list[float], window: int) -> list[tuple[int, float]]:
    """(step, mean of the `window` steps ending there), from the first full window on."""
    return [(i, sum(values[i - window + 1:i + 1]) / window) for i in range(window - 1, len(values))]


def _pass_mean(points: tuple[RunPoint, ...], n: int, last: bool) -> float:
    chosen = points[-n:] if last else points[:n]
    return sum(p.reward_mean for p in chosen) / len(chosen)


def _n(v: float) -> str:
    return significant(v, 3, strip=True)


def findings(result: SmolRunResult, facts: ModelFacts = SMOLLM2) -> tuple[str, ...]:
    points, n = result.points, len(result.task_names)
    out = []
    if len(points) >= 2 * n:
        first, last = _pass_mean(points, n, False), _pass_mean(points, n, True)
        moved = "rose" if last > first + 1e-9 else ("fell" if last < first - 1e-9 else "did not move")
        out.append(f"Mean reward over one pass of the {n} prompts {moved}: {_n(first)} in steps 0–{n - 1}, "
                   f"{_n(last)} in steps {len(points) - n}–{len(points) - 1}.")
    else:
        out.append(f"The run has {len(points)} steps, fewer than two passes over the {n} prompts: its first and "
                   "last pass cannot be compared.")
    lengths = [p.length_mean for p in points]
    model = f"a {facts.size_label} model" if facts.size_label else "this model"
    out.append(f"Answer length: {_n(lengths[0])} tokens at step 0, {_n(lengths[-1])} at step "
               f"{len(points) - 1} (R1-Zero's answers grew over thousands of steps, §2.2.4; {len(points)} steps of "
               f"{model} are not that).")
    kls = [p.kl_mean for p in points]
    peak = max(range(len(kls)), key=kls.__getitem__)
    out.append(f"KL to the reference per token: 0 at step 0 (the policy starts as the checkpoint), "
               f"{_n(kls[-1])} at the last step, largest {_n(kls[peak])} at step {peak}.")
    tied = [p for p in points if p.tied]
    if tied:
        steps = ", ".join(str(p.step) for p in tied[:8]) + (" …" if len(tied) > 8 else "")
        at = sorted({p.reward_mean for p in tied}, reverse=True)
        out.append(f"{len(tied)} of {len(points)} groups tied (every answer the same reward, so every advantage 0): "
                   f"step{'s' if len(tied) > 1 else ''} {steps} "
                   "moved the policy only through the KL term. "
                   f"Tied at reward {' / '.join(_n(r) for r in at[:4])}: "
                   "a group tied at its best has nothing left to learn from that prompt; one tied at 0, nothing yet.")
    else:
        out.append(f"No group tied: each of the {len(points)} steps had answers with different rewards.")
    if all(p.clip_share == 0 for p in points):
        out.append("Clip ratio 0 at every step: π_old is the policy that sampled (one update per group, TRL's "
                   "num_iterations = 1), so ρ = 1 and the clip never binds. Expected, not a bug.")
    return tuple(out)


def prompt_rows(result: SmolRunResult) -> tuple[PromptRow, ...]:
    rows = []
    for name in result.task_names:
        visits = [p for p in result.points if p.task_name == name]
        if not visits:
            continue

        def best(p: RunPoint) -> str:
            return max(p.answers, key=lambda a: a.reward).text.strip() if p.answers else ""
        rows.append(PromptRow(name, len(visits), visits[0].reward_mean, visits[-1].reward_mean, best(visits[0]),
                              best(visits[-1])))
    return tuple(rows)


def run_view(result: SmolRunResult, facts: ModelFacts = SMOLLM2) -> RunView:
    points, n = result.points, len(result.task_names)
    rewards = [p.reward_mean for p in points]
    reward_series = [("reward", "each step", list(enumerate(rewards)))]
    if len(points) >= n:
        reward_series.append(("pass", f"last {n} steps", _window_means(rewards, n)))
    caption = "x: GRPO step (step s answers prompt s mod 6)."
    charts = (
        line_chart("smol-reward", "Mean reward of the group", "reward", reward_series, x_label="step",
                   caption=caption),
        line_chart("smol-length", "Mean answer length", "tokens", [("length", "tokens", list(
            enumerate(p.length_mean for p in points)))], x_label="step", caption=caption, legend=False),
        line_chart("smol-kl", "KL to the reference, per token", "KL", [("kl", "KL", list(
            enumerate(p.kl_mean for p in points)))], x_label="step", caption=caption, legend=False),
    )
    return RunView(result, charts, findings(result, facts), prompt_rows(result),
                   sum(p.seconds for p in points) / max(1, len(points)))


def path_tabs(chosen: str, url_of) -> tuple[PathTab, ...]:
    return tuple(PathTab(p.id, p.title, url_of(p.id), p.id == chosen, p.id == "r1-zero") for p in PATHS)
