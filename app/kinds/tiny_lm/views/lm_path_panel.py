"""The tiny-LM walkthrough's process selector: R1-Zero, R1 and distillation run for real on the
tiny LM (engine/lm_paths.py) on the running-sums task, their progress while they run, then the
length view (views/length_view.py first, the start's habits and one prompt early and late,
GRPO against Dr. GRPO on R1-Zero), and under "More curves" the other metrics over the whole path
with its stages marked and a table of where each stage ended. `overlay`: the three paths together."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.training_paths import PATH_IDS, PathChoice
from app.kinds.tiny_lm.domain.arith_task import rewards
from app.kinds.tiny_lm.domain.sums_task import read_sum_prompt
from app.kinds.tiny_lm.engine.lm_paths import PATH_TITLES, PathResult
from app.kinds.tiny_lm.engine.lm_plans import GRPO_RECIPES, RULES_ALL
from app.kinds.tiny_lm.views.dr_grpo_view import DrGrpoView
from app.kinds.tiny_lm.views.habits_view import Showcase, StartHabits, build_showcase, build_start_habits
from app.kinds.tiny_lm.views.length_view import (
    PAIR_SIZE,
    X_LABEL,
    LengthView,
    along_path,
    build_length_view,
    marks,
    marks_caption,
)
from app.kinds.tiny_lm.views.overlay_view import OverlayView
from app.kinds.tiny_lm.views.token_steps import verdict
from app.stores.jobs import JobRecord
from app.views.charts.line_charts import LineChart, line_chart

# "More curves": what the first view's charts do not already show
METRICS = (("format_rate", "Format kept", "share", (0.0, 1.0)),
           ("mixed_rate", "Mixed-script answers", "share", (0.0, 1.0)),
           ("recheck_share", "Answers with a re-check", "share", (0.0, 1.0)),
           ("entropy", "Entropy", "nats per token", None),
           ("kl_to_reference", "KL to the reference", "nats per token", None))


@dataclass(frozen=True)
class StageRow:
    title: str
    kind: str
    description: str
    start: int  # optimiser steps done before it, over the whole path
    accuracy: float
    format_rate: float
    mixed_rate: float
    mean_length: float
    stepwise_share: float


# The reward rule a path's final model is judged by: its last GRPO stage's, or for distillation
# (no RL) the filter its data was kept by (right, formatted, one script).
FINAL_RULE = {"r1-zero": ("R1-Zero's reward", GRPO_RECIPES["rl"].reward),
              "r1": ("R1's final reward", GRPO_RECIPES["final_rl"].reward),
              "distillation": ("the rule R1's outputs were kept by", RULES_ALL)}


@dataclass(frozen=True)
class ExampleRow:
    prompt: str
    text: str
    verdict: str  # what the rule in force made of it, part by part
    reward: float  # the parts the rule counts, added


def example_rows(path: str, examples: tuple[tuple[str, str], ...]) -> tuple[ExampleRow, ...]:
    rule = FINAL_RULE[path][1]
    rows = []
    for prompt_text, text in examples:
        prompt = read_sum_prompt(prompt_text)
        if prompt is None:
            rows.append(ExampleRow(prompt_text, text, "", float("nan")))
            continue
        parts = rewards(prompt, text)
        rows.append(ExampleRow(prompt_text, text, verdict(prompt.answer, text, parts.accuracy, parts.format,
                                                          parts.language, rule), parts.total(rule)))
    return tuple(rows)


@dataclass(frozen=True)
class PathPanel:
    path: str | None
    title: str | None
    choices: tuple[PathChoice, ...]  # the shared selector's options (domain/training_paths.py)
    job: JobRecord | None  # the run's row in the job store (app/engine/jobs)
    poll_url: str | None
    result: PathResult | None = None
    retry_url: str | None = None  # POST: start a failed run again
    charts: tuple[LineChart, ...] = ()
    stages: tuple[StageRow, ...] = ()
    examples: tuple[tuple[str, str], ...] = ()
    example_rows: tuple[ExampleRow, ...] = ()
    length: LengthView | None = None  # the first view: headline, Figure-3 pair, by difficulty
    habits: StartHabits | None = None
    showcase: Showcase | None = None
    dr: DrGrpoView | None = None  # R1-Zero only: the same run under Dr. GRPO's conventions
    overlay: OverlayView | None = None  # set in overlay mode (then nothing above is)
    ahead: int | None = None  # queued: how many runs go before it (the server's start-up runs included)
    overlay_url: str | None = None  # the three paths together
    single_url: str | None = None  # back from the overlay to the path's own view
    start_url: str | None = None  # POST: start the runs nobody has started (a link never does)

    @property
    def running(self) -> bool:
        """A run this box shows is not done (not started, queued, running, or failed and able to start
        again): the box changes, so neither cache may keep it."""
        jobs = [self.job, self.dr.job if self.dr else None,
                *(e.job for e in (self.overlay.entries if self.overlay else ()))]
        return self.start_url is not None or any(j is not None and j.state != "done" for j in jobs)

    @property
    def rule_title(self) -> str:
        """Whose reward the examples are judged by, and its parts."""
        if self.path not in FINAL_RULE:
            return ""
        name, rule = FINAL_RULE[self.path]
        return f"{name} ({' + '.join(rule)})"

    @property
    def percent(self) -> int:
        return round(100 * self.job.fraction) if self.job else 0


def _curves(result: PathResult) -> tuple[tuple[LineChart, ...], tuple[StageRow, ...]]:
    offset, rows = 0, []
    for stage in result.stages:
        end = stage.points[-1].stats
        rows.append(StageRow(stage.title, stage.kind, stage.description, offset, end.accuracy, end.format_rate,
                             end.mixed_rate, end.mean_length, end.stepwise_share))
        offset += max((p.step for p in stage.points), default=0)
    along = along_path(result)
    w, h = PAIR_SIZE
    caption = f"x: {X_LABEL}s along the whole path." + marks_caption(along)
    charts = tuple(line_chart(f"lm-{key}", title, label, [(key, PATH_TITLES[result.path].split(":")[0],
                                                            [(x, getattr(p.stats, key)) for x, _s, p in along.points])],
                              fixed, w, h, x_label=X_LABEL, caption=caption, marks=marks(along))
                   for key, title, label, fixed in METRICS)
    return charts, tuple(rows)


def build_path_panel(path: str | None, job: JobRecord | None, result: PathResult | None, urls: dict[str, str],
                     poll_url: str | None, retry_url: str | None = None, *, dr: DrGrpoView | None = None,
                     overlay: OverlayView | None = None, overlay_url: str | None = None,
                     single_url: str | None = None, start_url: str | None = None,
                     ahead: int | None = None) -> PathPanel:
    choices = tuple(PathChoice(p, PATH_TITLES[p], urls[p], p == path and overlay is None) for p in PATH_IDS)
    if path is None or job is None:
        return PathPanel(path, PATH_TITLES.get(path or ""), choices, job, None, start_url=start_url,
                         overlay_url=overlay_url if path else None)
    if overlay is not None:
        return PathPanel(path, PATH_TITLES[path], choices, job, poll_url if overlay.running else None,
                         overlay=overlay, overlay_url=overlay_url, single_url=single_url)
    if result is None:
        failed = job.state == "failed"
        return PathPanel(path, PATH_TITLES[path], choices, job, None if failed else poll_url,
                         retry_url=retry_url if failed else None, overlay_url=overlay_url, ahead=ahead)
    charts, stages = _curves(result)
    return PathPanel(path, PATH_TITLES[path], choices, job, None, result, None, charts, stages, result.examples,
                     example_rows(path, result.examples), build_length_view(result), build_start_habits(result),
                     build_showcase(result), dr, overlay_url=overlay_url)
