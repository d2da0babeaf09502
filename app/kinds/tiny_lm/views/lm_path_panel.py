"""The tiny-LM walkthrough's process selector: R1-Zero, R1 and distillation run for real on the
tiny LM (engine/lm_paths.py), their progress while they run, then one curve per metric over the
whole path with its stages marked, and a table of where each stage ended."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.training_paths import PATH_IDS, PathChoice
from app.kinds.tiny_lm.engine.lm_paths import PATH_TITLES, PathResult
from app.kinds.tiny_lm.engine.path_jobs import PathJob
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


@dataclass(frozen=True)
class PathPanel:
    path: str | None
    title: str | None
    choices: tuple[PathChoice, ...]  # the shared selector's options (domain/training_paths.py)
    job: PathJob | None
    poll_url: str | None
    charts: tuple[LineChart, ...] = ()
    stages: tuple[StageRow, ...] = ()
    examples: tuple[tuple[str, str], ...] = ()

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


def build_path_panel(path: str | None, job: PathJob | None, urls: dict[str, str], poll_url: str | None) -> PathPanel:
    choices = tuple(PathChoice(p, PATH_TITLES[p], urls[p], p == path) for p in PATH_IDS)
    if path is None or job is None:
        return PathPanel(path, PATH_TITLES.get(path or ""), choices, job, None)
    if job.result is None:
        return PathPanel(path, PATH_TITLES[path], choices, job, None if job.error else poll_url)
    charts, stages = _curves(job.result)
    return PathPanel(path, PATH_TITLES[path], choices, job, None, charts, stages, job.result.examples)
