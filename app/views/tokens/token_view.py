"""The token view of any token-level GRPO group (the tiny LM's today, a recorded run's next):
each completion as its tokens, with one strip of numbers under them, chosen by the step
(log-prob, ratio and clip, KL, gradient weight, the update's change).

Reads a finished group (TokenGroup: its completions, app/engine/grpo/token_records.py); computes
nothing but layout (bar lengths, which completions to contrast), so every number on screen is the
engine's. The kind says which metric each of its steps shows first.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.engine.grpo.token_records import CompletionRecord, TokenRecord
from app.views.numbers import readout, significant


@dataclass(frozen=True)
class Metric:
    id: str
    label: str  # the strip's name
    explain: str  # one sentence: what the number under each token is
    value: Callable[[TokenRecord, CompletionRecord], float]
    centre: float = 0.0  # bars grow up (above) or down (below) from here
    log_scale: bool = False  # ratios: 2× and ½× are the same distance from 1


METRICS = {m.id: m for m in (
    Metric("logp_old", "log π_old", "log-probability the sampling model gave the token (0 = certain).",
           lambda t, c: t.logp_old),
    Metric("advantage", "advantage A", "the completion's advantage, the same for each of its tokens.",
           lambda t, c: c.advantage),
    Metric("ratio", "ratio ρ", "π_θ/π_old of the token; ✂ marks a token whose clip binds (no gradient).",
           lambda t, c: t.ratio, centre=1.0, log_scale=True),
    Metric("kl", "KL", "the per-token KL estimate against the reference (0 where they agree).",
           lambda t, c: t.kl),
    Metric("grad", "∂loss/∂log π", "how hard the loss pushes the token's log-probability "
           "(negative: gradient descent makes the token more likely).", lambda t, c: t.grad),
    Metric("delta", "Δ log π", "change in the token's log-probability after one optimiser step "
           "(positive: more likely).", lambda t, c: t.delta_logp),
)}
CLIP_METRICS = ("ratio", "grad", "delta")  # strips where a binding clip explains the number
AGGREGATION_TITLES = {"sample_mean": "mean per completion, then over the group (GRPO paper)",
                      "token_mean": "mean over all tokens of the group (DAPO, TRL, verl)",
                      "token_sum_norm": "sum over tokens ÷ (G·max length) (Dr. GRPO)"}


@dataclass(frozen=True)
class TokenCell:
    text: str
    value: float
    shown: str  # the value as printed under the token
    bar: float  # −1 … 1: signed length of the bar, from the strip's centre
    clipped: bool
    card: tuple[tuple[str, str], ...]  # every number of the token, for hover/focus and screen readers

    @property
    def label(self) -> str:
        return f"token {self.text}: " + ", ".join(f"{k} {v}" for k, v in self.card)


@dataclass(frozen=True)
class CompletionRow:
    index: int
    record: CompletionRecord
    cells: tuple[TokenCell, ...]

    @property
    def verdict(self) -> str:
        c = self.record
        words = ["right" if c.accuracy else "wrong", "formatted" if c.format else "unformatted"]
        if c.language < 1:
            words.append(f"{round(100 * c.language)}% in the prompt's script")
        return ", ".join(words)


@dataclass(frozen=True)
class LengthContrast:
    """A short and a long completion of the same sign of advantage: the aggregations' length bias."""
    short: int
    long: int
    sentence: str


@dataclass(frozen=True)
class TokenPanel:
    result: Any  # a TokenGroup, with whatever else its kind recorded (the templates read it)
    step_id: str
    metric: Metric
    rows: tuple[CompletionRow, ...]
    contrast: LengthContrast | None

    @property
    def metrics(self) -> tuple[Metric, ...]:
        return tuple(METRICS.values())

    @property
    def aggregation_titles(self) -> dict[str, str]:
        return AGGREGATION_TITLES

    @property
    def clipped_count(self) -> int:
        return sum(t.clip_active for c in self.result.completions for t in c.tokens)

    @property
    def token_count(self) -> int:
        return sum(c.length for c in self.result.completions)


def _card(t: TokenRecord) -> tuple[tuple[str, str], ...]:
    card = [("log π", readout(t.logp)), ("log π_old", readout(t.logp_old)), ("log π_ref", readout(t.logp_ref)),
            ("ρ", readout(t.ratio)), ("clip", "binds ✂" if t.clip_active else "free"), ("KL", readout(t.kl)),
            ("weight w", readout(t.weight)), ("∂loss/∂log π", readout(t.grad)),
            ("Δ log π after the step", readout(t.delta_logp))]
    if t.dual_clip_hit:
        card.insert(5, ("dual clip", "binds ⌊"))
    return tuple(card)


def _scale(metric: Metric, values: list[float]) -> Callable[[float], float]:
    def moved(v: float) -> float:
        if metric.log_scale:
            return math.log(max(v, 1e-300)) - math.log(metric.centre)
        return v - metric.centre
    top = max((abs(moved(v)) for v in values), default=0.0)
    return (lambda v: 0.0) if top == 0 else (lambda v: moved(v) / top)


def _contrast(result: TokenGroup) -> LengthContrast | None:
    """The shortest and the longest completion with the same sign of advantage (prefer negative:
    a short wrong answer against a long wrong one), if their lengths differ."""
    for sign in (-1, 1):
        same = [i for i, c in enumerate(result.completions) if c.advantage * sign > 0]
        if len(same) < 2:
            continue
        short = min(same, key=lambda i: result.completions[i].length)
        long = max(same, key=lambda i: result.completions[i].length)
        cs, cl = result.completions[short], result.completions[long]
        if cs.length == cl.length:
            continue
        parts = []
        for mode in ("sample_mean", "token_mean", "token_sum_norm"):
            ws, wl = cs.weight_by_aggregation[mode], cl.weight_by_aggregation[mode]
            parts.append(f"{mode}: {readout(ws)} vs {readout(wl)} per token ({readout(ws / wl)}×)")
        verb = "pushed down" if sign < 0 else "pushed up"
        sentence = (f"Completion {short} has {cs.length} tokens, completion {long} has {cl.length}; both are "
                    f"{verb} (A = {readout(cs.advantage)} and {readout(cl.advantage)}). Each token's weight w — "
                    + "; ".join(parts) + ". Under the paper's mean per completion, each token of the short "
                    "one counts more, so a long wrong answer is penalised less per token: the length bias "
                    "Dr. GRPO removes.")
        return LengthContrast(short, long, sentence)
    return None


class TokenGroup(Protocol):
    """What the token view reads of a kind's result: its completions, token by token."""
    @property
    def completions(self) -> tuple[CompletionRecord, ...]: ...


def build_token_panel(result: TokenGroup, step_id: str, metric_id: str | None = None,
                      default_metric: str = "grad") -> TokenPanel:
    """The token strips under `metric_id`, else the step's own metric (`default_metric`, chosen by
    the kind for its step)."""
    metric = METRICS[metric_id or default_metric]
    values = [metric.value(t, c) for c in result.completions for t in c.tokens]
    scale = _scale(metric, values)
    rows = tuple(CompletionRow(i, c, tuple(
        TokenCell(t.text, metric.value(t, c), significant(metric.value(t, c), 3, strip=True), scale(metric.value(t, c)),
                  t.clip_active and metric.id in CLIP_METRICS, _card(t)) for t in c.tokens))
        for i, c in enumerate(result.completions))
    return TokenPanel(result, step_id, metric, rows, _contrast(result))
