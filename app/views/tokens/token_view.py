"""The token view of any token-level GRPO group (any kind whose completions are tokens):
each completion as its tokens, with one strip of numbers under them, chosen by the step
(log-prob, reward, advantage, ratio and clip, KL, weight, gradient, the update's change).

Reads a finished group (TokenGroup: its completions, app/engine/grpo/token_records.py); computes
nothing but layout (bar lengths, which completions to contrast), so every number on screen is the
engine's. The kind says which metric each of its steps shows first, what the step has introduced so
far (`shown`: the strips and card lines a step may show; nothing before its time), the
verdict of each completion under the reward rule in force, and the KL term's share of each token's
gradient, so that a clipped token that still moves says why.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from app.engine.grpo.token_records import CompletionRecord, TokenRecord
from app.views.numbers import ratio, readout
from app.views.tokens.metrics import ADVANTAGE, GRAD, KL, RATIO, WEIGHT, Metric, scale

METRICS = {m.id: m for m in (
    Metric("logp_old", "log π_old", "log-probability the sampling model gave the token (0 = certain)."),
    Metric("reward", "reward r", "the completion's reward under the rule in force, the same for each of its tokens "
           "(its parts are beside the completion)."),
    ADVANTAGE, replace(RATIO, spell=lambda v: ratio(v)), KL, WEIGHT, GRAD,
    Metric("delta", "Δ log π", "change in the token's log-probability after one optimiser step "
           "(positive: more likely)."),
)}
# Each metric's number, read from a token record and its completion
VALUES: dict[str, Callable[[TokenRecord, CompletionRecord], float]] = {
    "logp_old": lambda t, c: t.logp_old, "reward": lambda t, c: c.reward, "advantage": lambda t, c: c.advantage,
    "ratio": lambda t, c: t.ratio, "kl": lambda t, c: t.kl, "weight": lambda t, c: t.weight,
    "grad": lambda t, c: t.grad, "delta": lambda t, c: t.delta_logp,
}
CLIP_METRICS = ("ratio", "kl", "weight", "grad", "delta")  # strips where a binding clip explains the number
AGGREGATION_TITLES = {"sample_mean": "mean per completion, then over the group (GRPO paper)",
                      "token_mean": "mean over all tokens of the group (DAPO, TRL, verl)",
                      "token_sum_norm": "sum over tokens ÷ (G·max length) (Dr. GRPO)"}


@dataclass(frozen=True)
class TokenCell:
    text: str
    value: float
    shown: str  # the value as printed under the token
    bar: float  # −1 … 1: signed length of the bar, from the strip's centre
    clipped: bool  # ✂ under the token: the clip binds, and this step has introduced the clip
    card: tuple[tuple[str, str], ...]  # the token's numbers so far, for hover/focus and screen readers
    kl_pull: bool = False  # clipped, yet the KL term still gives it a gradient (said in the card)

    @property
    def label(self) -> str:
        return f"token {self.text}: " + ", ".join(f"{k} {v}" for k, v in self.card)


@dataclass(frozen=True)
class CompletionRow:
    index: int
    record: CompletionRecord
    cells: tuple[TokenCell, ...]
    verdict: str  # what the reward rule in force made of it, in words (empty before rewards are shown)

    @property
    def weights(self) -> str:
        """Each token's weight w under each aggregation: the same within a completion."""
        return " · ".join(f"{m} {readout(w)}" for m, w in self.record.weight_by_aggregation.items())


def parts_verdict(c: CompletionRecord) -> str:
    """The reward parts as numbers, for a kind that has no words for them."""
    return f"accuracy {readout(c.accuracy)} · format {readout(c.format)} · language {readout(c.language)}"


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
    shown: frozenset[str] = frozenset(METRICS)  # what the step has introduced

    @property
    def metrics(self) -> tuple[Metric, ...]:
        """The strips this step may switch to: those it has introduced."""
        return tuple(m for m in METRICS.values() if m.id in self.shown)

    @property
    def kl_pull_count(self) -> int:
        """Clipped tokens whose KL term still gives them a gradient (their cards say so)."""
        return sum(cell.kl_pull for row in self.rows for cell in row.cells)

    @property
    def aggregation_titles(self) -> dict[str, str]:
        return AGGREGATION_TITLES

    @property
    def clipped_count(self) -> int:
        return sum(t.clip_active for c in self.result.completions for t in c.tokens)

    @property
    def token_count(self) -> int:
        return sum(c.length for c in self.result.completions)


def _clip_words(t: TokenRecord, kl_grad: float | None, shown: Collection[str]) -> str:
    if not t.clip_active:
        return "free"
    if t.grad - (kl_grad or 0.0) != 0:  # CISPO's cap: the capped ratio still weighs the token's push
        return "capped ✂: the ratio's cap is a constant weight, the push remains"
    words = "binds ✂: no push from the surrogate"
    if "kl" in shown and kl_grad:
        words += f"; the KL term still pulls: {readout(kl_grad)}"
    return words


def _card(t: TokenRecord, c: CompletionRecord, shown: Collection[str], kl_grad: float | None,
          bounds: tuple[float, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The token's numbers, only those the step has introduced, in the order the steps do."""
    card = [("log π_old", readout(t.logp_old))]
    if "advantage" in shown:
        card.append(("A", readout(c.advantage)))
    if "ratio" in shown:
        card += [("log π", readout(t.logp)), ("ρ", ratio(t.ratio, bounds)), ("clip", _clip_words(t, kl_grad, shown))]
        if t.dual_clip_hit:
            card.append(("dual clip", "binds ⌊"))
    if "kl" in shown:
        card += [("log π_ref", readout(t.logp_ref)), ("KL", readout(t.kl))]
    if "weight" in shown:
        card.append(("weight w", readout(t.weight)))
        if len(c.weight_by_aggregation) > 1:
            card.append(("w by aggregation", " · ".join(f"{m} {readout(w)}" for m, w in
                                                         c.weight_by_aggregation.items())))
    if "grad" in shown:
        split = "" if kl_grad is None else f" (surrogate {readout(t.grad - kl_grad)}, KL {readout(kl_grad)})"
        card.append(("∂loss/∂log π", readout(t.grad) + split))
    if "delta" in shown:
        card.append(("Δ log π after the step", readout(t.delta_logp)))
    return tuple(card)


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
                      default_metric: str = "grad", shown: Collection[str] | None = None,
                      verdicts: Sequence[str] | None = None,
                      kl_grads: Sequence[Sequence[float]] | None = None,
                      ratio_bounds: tuple[float, ...] = ()) -> TokenPanel:
    """The token strips under `metric_id`, else the step's own metric (`default_metric`, chosen by
    the kind for its step). `shown`: the metrics the step has introduced (None: all); a metric
    asked for by name is shown too. `verdicts`: per completion, in words; `kl_grads`: per token,
    the KL term's part of ∂loss/∂log π; `ratio_bounds`: the clip bounds ratios are printed apart from."""
    metric = METRICS[metric_id or default_metric]
    revealed = frozenset(METRICS if shown is None else (*shown, metric.id))
    value = VALUES[metric.id]
    bar = scale(metric, [value(t, c) for c in result.completions for t in c.tokens])
    marks_clip = metric.id in CLIP_METRICS and "ratio" in revealed
    spell = (lambda v: ratio(v, ratio_bounds)) if metric.id == "ratio" else metric.spell
    rows = []
    for i, c in enumerate(result.completions):
        cells = []
        for k, t in enumerate(c.tokens):
            kl = kl_grads[i][k] if kl_grads else None
            v = value(t, c)
            cells.append(TokenCell(t.text, v, spell(v), bar(v), t.clip_active and marks_clip,
                                   _card(t, c, revealed, kl, ratio_bounds),
                                   bool(t.clip_active and kl and {"ratio", "kl"} <= revealed)))
        verdict = "" if "reward" not in revealed else (verdicts[i] if verdicts else parts_verdict(c))
        rows.append(CompletionRow(i, c, tuple(cells), verdict))
    return TokenPanel(result, step_id, metric, tuple(rows), _contrast(result), revealed)
