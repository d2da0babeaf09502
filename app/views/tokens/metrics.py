"""The numbers a token view can put under each token, described once for every kind: what each is
called, what it means, and where its bars grow from. A kind's token view picks the ones it has and
reads their values from its own results (the token panel from token records, the record's window
from recomputed arrays).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.views.numbers import significant


@dataclass(frozen=True)
class Metric:
    id: str  # also what a step's `shown` names to reveal it
    label: str  # the strip's name
    explain: str  # one sentence: what the number under each token is
    centre: float = 0.0  # bars grow up (above) or down (below) from here
    log_scale: bool = False  # ratios: 2× and ½× are the same distance from 1
    spell: Callable[[float], str] = lambda v: significant(v, 2, strip=True)  # the card has 4 digits

    def moved(self, v: float) -> float:
        """How far `v` is from the centre, on the metric's own scale."""
        if self.log_scale:
            return math.log(max(v, 1e-300)) - math.log(self.centre)
        return v - self.centre


def scale(metric: Metric, values: Iterable[float]) -> Callable[[float], float]:
    """Bars on one scale for `values`: −1 … 1 from the centre, the farthest value at ±1."""
    top = max((abs(metric.moved(v)) for v in values), default=0.0)
    return (lambda v: 0.0) if top == 0 else (lambda v: max(-1.0, min(1.0, metric.moved(v) / top)))


def visible(text: str) -> str:
    """A token as it reads on screen: a space is ·, a newline ↵, a tab →; nothing vanishes."""
    if text == "":
        return "∅"
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "→").replace("\r", "␍")


# The metrics every token-level GRPO step has, whichever kind computed it.
ADVANTAGE = Metric("advantage", "advantage A", "the completion's advantage, the same for each of its tokens.")
RATIO = Metric("ratio", "ratio ρ", "π_θ/π_old of the token; ✂ marks a token whose clip binds (no push from the "
               "surrogate).", centre=1.0, log_scale=True)
KL = Metric("kl", "KL", "the per-token estimate of KL(π_θ ‖ π_ref) (0 where they agree).")
WEIGHT = Metric("weight", "weight w", "the token's share of the loss under the aggregation in force.")
GRAD = Metric("grad", "∂loss/∂log π", "how hard the loss pushes the token's log-probability (negative: a "
              "gradient-descent step makes the token more likely).")
