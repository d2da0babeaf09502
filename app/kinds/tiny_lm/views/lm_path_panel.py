"""The tiny-LM walkthrough's process selector: R1-Zero, R1 and distillation run for real on the
tiny LM (engine/lm_paths.py), their progress while they run, then one curve per metric over the
whole path with its stages marked, and a table of where each stage ended."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.job_store import JobRecord
from app.domain.training_paths import PATH_IDS, PathChoice
from app.kinds.tiny_lm.domain.arith_task import SECOND_SCRIPT, ArithPrompt, read_number, rewards
from app.kinds.tiny_lm.engine.lm_paths import PATH_TITLES, PathResult
from app.kinds.tiny_lm.engine.lm_plans import GRPO_RECIPES, RULES_ALL
from app.kinds.tiny_lm.views.token_steps import verdict
from app.views.charts.line_charts import LineChart, line_chart

METRICS = (("accuracy", "accuracy", (0.0, 1.0)), ("format_rate", "format rate", (0.0, 1.0)),
           ("mixed_rate", "mixed-script rate", (0.0, 1.0)), ("mean_length", "mean length (tokens)", None),
           ("entropy", "entropy (nats/token)", None), ("kl_to_reference", "KL to the reference", None))


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


def _prompt(text: str) -> ArithPrompt | None:
    """An example's prompt read back ("15+9=", "bf+j="); None if it is not one."""
    left, _, rest = text.partition("+")
    a, b = read_number(left), read_number(rest.removesuffix("="))
    if a is None or b is None or not rest.endswith("="):
        return None
    return ArithPrompt(a, b, "letters" if any(ch in SECOND_SCRIPT for ch in text) else "digits")


def example_rows(path: str, examples: tuple[tuple[str, str], ...]) -> tuple[ExampleRow, ...]:
    rule = FINAL_RULE[path][1]
    rows = []
    for prompt_text, text in examples:
        prompt = _prompt(prompt_text)
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
    offset, xs, rows = 0, [], []
    for stage in result.stages:
        rows.append(StageRow(stage.title, stage.kind, stage.description, offset, stage.points[-1].accuracy,
                             stage.points[-1].format_rate, stage.points[-1].mixed_rate, stage.points[-1].mean_length))
        xs += [(offset + p.step, p) for p in stage.points]
        offset += max((p.step for p in stage.points), default=0)
    charts = tuple(line_chart(f"lm-{key}", label, label, [(key, PATH_TITLES[result.path].split(":")[0],
                                                             [(x, getattr(p, key)) for x, p in xs])], fixed)
                   for key, label, fixed in METRICS)
    return charts, tuple(rows)


def build_path_panel(path: str | None, job: JobRecord | None, result: PathResult | None, urls: dict[str, str],
                     poll_url: str | None, retry_url: str | None = None) -> PathPanel:
    choices = tuple(PathChoice(p, PATH_TITLES[p], urls[p], p == path) for p in PATH_IDS)
    if path is None or job is None:
        return PathPanel(path, PATH_TITLES.get(path or ""), choices, job, None)
    if result is None:
        failed = job.state == "failed"
        return PathPanel(path, PATH_TITLES[path], choices, job, None if failed else poll_url,
                         retry_url=retry_url if failed else None)
    charts, stages = _curves(result)
    return PathPanel(path, PATH_TITLES[path], choices, job, None, result, None, charts, stages, result.examples,
                     example_rows(path, result.examples))
