"""A toy training stage's curves, drawn with the shared line-chart geometry."""
from __future__ import annotations

from app.kinds.toy.engine.processes import StageRun
from app.views.charts.line_charts import LineChart, line_chart


def _point_value(point, key: str) -> float | None:
    """A curve point's metric (eval_reward, accuracy, …) or its loss / train_reward."""
    return getattr(point.metrics, key) if hasattr(point.metrics, key) else getattr(point, key)


def stage_curves(run: StageRun) -> list[LineChart]:
    """One small chart per metric; [] for a stage that does not train (rejection sampling)."""
    curve = list(run.curve)
    if not curve:
        return []
    start = run.start_metrics

    def pts(key: str, with_start: bool = True) -> list:
        return ([(0, getattr(start, key))] if with_start else []) + [(p.iteration, _point_value(p, key))
                                                                     for p in curve]

    rl = run.stage.kind == "grpo"
    charts = [
        line_chart("reward", "Reward", "reward (max 2)",
                   [("eval_reward", "eval reward", pts("eval_reward")),
                    ("train_reward", "sampled-group reward", pts("train_reward", False))], (0.0, 2.0)),
        line_chart("accuracy", "Accuracy", "share right", [("accuracy", "accuracy", pts("accuracy"))], (0.0, 1.0)),
        line_chart("language", "Readable vs mixed-language answers", "probability",
                   [("p_correct", "readable correct", pts("p_correct")),
                    ("p_mixed", "mixed language", pts("p_mixed"))], (0.0, 1.0)),
        line_chart("divergence", f"Divergence from {run.stage.reference}", "KL",
                   [("divergence", "divergence", pts("divergence"))]),
    ]
    if any(p.loss is not None for p in curve):
        charts.append(line_chart("loss", "GRPO loss (−J)" if rl else "Cross-entropy loss", "loss",
                                 [("loss", "loss", pts("loss", False))]))
    return charts
