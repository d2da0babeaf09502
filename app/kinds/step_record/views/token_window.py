"""A recorded step's token view: the shared window and strip (app/views/tokens/window.py) over the
recomputed step, with the record's own metrics (its log-probs, the framework's entropy, the what-if's
change of gradient). Every number is the engine's (engine/step.py).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from app.kinds.step_record.engine.step import CompletionResult, Recomputed
from app.views.tokens.metrics import ADVANTAGE, GRAD, KL, RATIO, WEIGHT, Metric
from app.views.tokens.window import Strip, Values, Window, build_strip, build_window

METRICS = {m.id: m for m in (
    Metric("logprob", "log π", "the log-probability the trained model gave the token at loss time (0 = certain)."),
    ADVANTAGE, RATIO, KL, WEIGHT, GRAD,
    Metric("entropy", "entropy H", "the policy's entropy at the token's position, as the framework recorded it."),
    Metric("change", "Δ ∂loss/∂log π", "the what-if convention's gradient minus the record's: how the other "
                                       "convention would have pushed this token differently."),
)}


def values(metric: str, c: CompletionResult, entropy: np.ndarray | None,
           other: CompletionResult | None) -> np.ndarray | None:
    """The metric per token of one completion; None where the record or the view has none."""
    pick: dict[str, Callable[[], np.ndarray | None]] = {
        "logprob": lambda: c.logp, "advantage": lambda: np.full(len(c.logp), c.advantage),
        "ratio": lambda: c.ratio, "kl": lambda: c.kl, "weight": lambda: c.weight, "grad": lambda: c.grad,
        "entropy": lambda: entropy, "change": lambda: None if other is None else other.grad - c.grad,
    }
    return pick[metric]()


def record_values(result: Recomputed, entropy: Mapping[int, np.ndarray | None], other: Recomputed | None) -> Values:
    """The shared view's values: the metric per token of completion `row`; `entropy` by row."""
    def pick(metric: str, row: int) -> np.ndarray | None:
        return values(metric, result.completions[row], entropy.get(row), other.completions[row] if other else None)
    return pick


def build_record_window(result: Recomputed, row: int, tokens: list[str], start: int, metric_id: str,
                        entropy: Mapping[int, np.ndarray | None], other: Recomputed | None,
                        url: Callable[[int], str]) -> Window:
    return build_window(result.completions, row, tokens, start, METRICS[metric_id],
                        record_values(result, entropy, other), url)


def build_record_strip(result: Recomputed, rows: list[int], metric_id: str, entropy: Mapping[int, np.ndarray | None],
                       other: Recomputed | None, current: int, url: Callable[[int, int], str]) -> Strip:
    return build_strip(result.completions, rows, METRICS[metric_id], record_values(result, entropy, other),
                       current, url)
