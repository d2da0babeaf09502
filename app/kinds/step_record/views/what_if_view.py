"""A recorded step's what-if, as the record's page shows it: the numbers both sides give, the
conventions it changed (the record's value beside the what-if's, as the toy's Compare), and why the
app's advantages from the rewards differ from the framework's, with the switch that tests the cause.
Words and rows only: the recomputations come finished (engine/step.py, engine/advantage_fit.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.kinds.step_record.engine.advantage_fit import AdvantageFit
from app.kinds.step_record.engine.step import Recomputed
from app.views.convention_text import FIELD_NAMES
from app.views.numbers import readout
from app.views.urls import query_value


@dataclass(frozen=True)
class CompareRow:
    label: str
    own: float | None  # None: not a number of the recorded step (a change, or a KL with β = 0)
    other: float | None
    count: bool = False  # a number of tokens, printed whole


@dataclass(frozen=True)
class ConventionChange:
    """One convention the what-if changes: the record's value against the what-if's."""
    name: str
    label: str
    recorded: str
    what_if: str


@dataclass(frozen=True)
class AdvantageCause:
    """Why the app's A from r differs from the framework's A, and the link that switches the assumption."""
    sentence: str
    switch_label: str | None
    switch_url: str | None


def compare_rows(own: Recomputed, other: Recomputed | None) -> tuple[CompareRow, ...]:
    if other is None:
        return ()
    rows = [CompareRow("loss", own.loss, other.loss), CompareRow("‖∂loss/∂log π‖", own.grad_norm, other.grad_norm)]
    for key in ("clip_ratio/region_mean", "cispo_clip_ratio", "kl"):
        if key in own.metrics or key in other.metrics:
            rows.append(CompareRow(key, own.metrics.get(key), other.metrics.get(key)))
    change = np.concatenate([o.grad - m.grad for m, o in zip(own.completions, other.completions, strict=True)])
    base = np.concatenate([m.grad for m in own.completions])
    rows.append(CompareRow("max |Δ ∂loss/∂log π| per token", None, float(np.abs(change).max())))
    rows.append(CompareRow("tokens whose push changes sign", None,
                           float(((np.sign(base) != np.sign(base + change)) & (base != 0)).sum()), count=True))
    return tuple(rows)


def _sci(x: float) -> str:
    return f"{x:.1e}".replace("-", "−")


def _epsilon(std: str, eps: float) -> str:
    return "no ÷ std" if std == "none" else f"{std} std + ε = {eps:g}" if eps else f"{std} std, no ε"


def advantage_cause(fit: AdvantageFit, own: Recomputed, other: Recomputed | None, url) -> AdvantageCause | None:
    """The likely cause of the ≠ rows, computed (advantage_fit), with the switch that tests it."""
    if fit.mismatched == 0:
        return None
    assumed = _epsilon(fit.assumed_std, fit.assumed_epsilon)
    size = (f"{fit.mismatched} of the step's {fit.total} completions' advantages differ, by up to "
            f"{readout(fit.max_diff)} in A's units ({_sci(fit.max_rel)} of A). ")
    where = ("the reader assumed it: the file does not record it" if fit.assumed_note and other is None
             else "the what-if's" if other is not None else "the record's config")
    if fit.best_std is None or fit.best_epsilon is None:
        return AdvantageCause(size + f"A from r uses {assumed} ({where}); no std or ε reproduces the framework's "
                              f"A (closest: {_sci(fit.best_gap)} of A): its advantages came from other rewards (a "
                              "reward scaled or shaped after logging, a KL in the reward, or groups over more "
                              "completions than the record holds).", None, None)
    best = _epsilon(fit.best_std, fit.best_epsilon)
    switch = fit.switch
    if switch is None:  # the best fit is what is shown: the rows differ only under a what-if's std or ε
        return AdvantageCause(size + f"A from r uses {assumed}, which reproduces the framework's A from the "
                              "record's rewards; the what-if's rewards differ (a KL in the reward).", None, None)
    target = {**(other_what_if(other, own) if other is not None else {}), **switch}
    how_close = "exactly" if fit.best_gap == 0 else f"to {_sci(fit.best_gap)} of A"
    return AdvantageCause(size + f"Likely cause: A from r uses {assumed} ({where}), while the file's numbers match "
                          f"{best} ({how_close}, computed from the same rewards).",
                          f"Recompute with {best}", url(what_if=target) + "#record-group-table")


def other_what_if(other: Recomputed, own: Recomputed) -> dict[str, str]:
    """The fields where the what-if differs from the record's own conventions (its URL without a preset)."""
    a, b = own.conventions, other.conventions
    return {n: query_value(n, getattr(b, n)) for n in type(b).model_fields
            if n != "preset" and getattr(a, n) != getattr(b, n)}


def convention_changes(own: Recomputed, other: Recomputed | None) -> tuple[ConventionChange, ...]:
    """The conventions the what-if changed, the record's value beside the what-if's (as the toy's Compare)."""
    if other is None:
        return ()
    a, b = own.conventions, other.conventions
    # the IS bounds do nothing while neither side corrects: a preset's default 3 is not a change
    idle = {"is_clip_min", "is_clip_max"} if a.is_correction == b.is_correction == "none" else set()
    rows = [ConventionChange(n, FIELD_NAMES.get(n, n), query_value(n, getattr(a, n)), query_value(n, getattr(b, n)))
            for n in type(b).model_fields if n != "preset" and n not in idle and getattr(a, n) != getattr(b, n)]
    if not own.own_conventions or other.own_conventions:
        return tuple(rows)
    # the record's loss used the framework's advantages; the what-if's are recomputed from the rewards
    return (*rows, ConventionChange("advantages", "advantages A", "the framework's (recorded)", "from the rewards"))
