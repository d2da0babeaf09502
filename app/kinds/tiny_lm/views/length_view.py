"""The paths box's first view: R1-Zero's Figure 3 (answers grow longer as accuracy rises)
reproduced on the running-sums task, said in one sentence computed from the run's own numbers, then
the pair of charts that proves it, and the same by difficulty.

Honest by construction: every verb of the headline (rose, fell, grew, shrank) is chosen from the
numbers it quotes, and the reading that follows claims Figure 3 only when they show it. The growth
is reward-driven on a task where steps help (a running sum is right more often than a guess), not
an "aha moment": nothing in the reward pays length.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.kinds.tiny_lm.engine.lm_paths import PathPoint, PathResult
from app.kinds.tiny_lm.engine.sums_measure import Stats
from app.views.charts.line_charts import LineChart, line_chart
from app.views.numbers import MINUS

X_LABEL = "optimiser step"
PAIR_SIZE = (340, 180)  # a phone's box is 340 px inside: 11 px text at 1:1; a desktop scales it up
STEADY_POINTS = 0.02  # an accuracy or share that moved less than this "held"
STEADY_LENGTH = 0.03  # a mean length that moved less than this fraction "kept its length"


def pct(v: float | None) -> str:
    return "—" if v is None else f"{round(100 * v)}%"


def tokens(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def signed_pct(rel: float) -> str:
    return f"+{round(100 * rel)}%" if rel >= 0 else f"{MINUS}{round(-100 * rel)}%"


@dataclass(frozen=True)
class Along:
    """A path's evaluation points on one x axis: optimiser steps along the whole path."""
    points: tuple[tuple[int, str, PathPoint], ...]  # (x, stage id, point)
    starts: tuple[tuple[int, str], ...]  # (x, stage title) of each stage after the first
    skipped: str | None = None  # a leading stage left off because it measures another model


def along_path(result: PathResult) -> Along:
    """A stage starts where the one before it ended (a rejection-sampling stage takes no optimiser
    step). Distillation's first stage measures R1, the teacher, not the student: its curves start at
    the student's own start, so the first point is the model the path trains."""
    stages = list(result.stages)
    skipped = None
    if len(stages) > 1 and stages[0].kind == "rejection_sampling":
        skipped = stages.pop(0).title
    out, starts, offset = [], [], 0
    for n, stage in enumerate(stages):
        if n:
            starts.append((offset, stage.title))
        out += [(offset + p.step, stage.id, p) for p in stage.points]
        offset += max((p.step for p in stage.points), default=0)
    return Along(tuple(out), tuple(starts), skipped)


def marks(along: Along) -> list[tuple[float, str]]:
    """The stage starts as numbered marks (the caption names them); stages that start at one step
    (a rejection-sampling stage takes none) share a mark, "3, 4"."""
    at: dict[int, list[str]] = {}
    for n, (x, _title) in enumerate(along.starts):
        at.setdefault(x, []).append(str(n + 2))
    return [(x, ", ".join(names)) for x, names in at.items()]


def marks_caption(along: Along) -> str:
    if not along.starts:
        return ""
    named = "; ".join(f"{n + 2} {title} at {x}" for n, (x, title) in enumerate(along.starts))
    return f" Dotted verticals: where each stage starts ({named})."


def _moved(a: float, b: float, up: str, down: str, steady: str, fmt, tol: float) -> str:
    if abs(b - a) < tol:
        return f"{steady} ({fmt(a)} → {fmt(b)})"
    return f"{up if b > a else down} {fmt(a)} → {fmt(b)}"


def headline(start: Stats, end: Stats, start_by: dict[int, Stats], end_by: dict[int, Stats]) -> str:
    """One sentence of start → end numbers whose verbs follow them (tested both ways)."""
    acc = _moved(start.accuracy, end.accuracy, "Accuracy rose", "Accuracy fell", "Accuracy held", pct,
                 STEADY_POINTS)
    a, b = start.mean_length, end.mean_length
    if abs(b - a) < STEADY_LENGTH * a:
        length = f"answers kept their length ({tokens(a)} → {tokens(b)} tokens)"
    else:
        length = f"answers {'grew' if b > a else 'shrank'} from {tokens(a)} to {tokens(b)} tokens"
    c0, c1 = start.mean_length_correct, end.mean_length_correct
    if c0 is not None and c1 is not None:
        length += f" (correct ones {signed_pct(c1 / c0 - 1)})"
    else:
        length += " (no correct answer at the " + ("start" if c0 is None else "end") + " to compare)"
    steps = _moved(start.stepwise_share, end.stepwise_share, "step-by-step answers rose", "step-by-step answers fell",
                   "step-by-step answers held", pct, STEADY_POINTS)
    hardest = max(set(start_by) & set(end_by), default=None)
    if hardest is not None:
        steps += f" (on {hardest}-number sums {pct(start_by[hardest].stepwise_share)} → " \
                 f"{pct(end_by[hardest].stepwise_share)})"
    return f"{acc} while {length}; {steps}."


def growth_pace(along: Along) -> str:
    """When the mean length got most of its growth: Figure 3's climbs through the whole run, and a run
    whose growth is over early says so rather than borrow that picture."""
    pts = [(x, p.stats.mean_length) for x, _s, p in along.points]
    (x0, a), (last, b) = pts[0], pts[-1]
    if b - a < STEADY_LENGTH * a or last <= x0:
        return ""
    by = next(x for x, v in pts if v - a >= 0.8 * (b - a))
    if by - x0 <= 0.5 * (last - x0):
        return (f" Most of the growth (80%) came by step {by} of {last}, then the length stays about flat: "
                f"not Figure 3's steady climb.")
    return f" The growth runs through the run (80% of it by step {by} of {last}), as in Figure 3."


def reading(path: str, start: Stats, end: Stats) -> tuple[str, str]:
    """(label, why): what the headline's numbers mean for this path, claimed only where they show it.
    The label sits between the headline and the charts; the why under them."""
    if path == "r1":
        return ("R1: step-by-step answers taught by example first, then RL.",
                "R1's cold-start SFT teaches step-by-step answers by example before any RL (R1 §2.3.1), so part of "
                "its length is imitation; its RL stages pay only right, formatted, single-script answers.")
    if path == "distillation":
        return ("Distillation: imitation of R1's outputs, no RL.",
                "The student imitates R1's kept outputs with no RL at all (R1 §2.4): any length it gains is learnt "
                "from the teacher, not found by a reward.")
    rose = end.accuracy - start.accuracy >= STEADY_POINTS
    grew = end.mean_length - start.mean_length >= STEADY_LENGTH * start.mean_length
    steps_up = end.stepwise_share - start.stepwise_share >= STEADY_POINTS
    if rose and grew and steps_up:
        return ("R1-Zero's Figure 3 at toy scale: reward-driven length growth on a task where steps help, "
                "not an \u201caha moment\u201d.",
                "The reward pays a right answer in the template, never length; running sums are right more often "
                "than guesses, so RL made the model write them, and answers grew longer.")
    if rose and grew:
        return ("Accuracy and length rose together, as in R1-Zero's Figure 3, but not through more step-by-step "
                "answers.", "This run does not show why its answers grew longer.")
    if rose:
        return ("Accuracy rose without longer answers: this run does not reproduce R1-Zero's Figure 3.",
                "Length growth under RL is not guaranteed (Yeo et al. 2025, arXiv 2502.03373).")
    return ("Accuracy did not rise: this run does not reproduce R1-Zero's Figure 3.",
            "Length growth under RL is not guaranteed (Yeo et al. 2025, arXiv 2502.03373).")


@dataclass(frozen=True)
class DifficultyRow:
    n: int
    accuracy: str  # "31% → 62%"
    stepwise: str
    length_correct: str  # "12.0 → 20.1"


@dataclass(frozen=True)
class LengthView:
    headline: str
    label: str  # what the numbers are, in a few words (claims Figure 3 only where they show it)
    why: str
    length: LineChart  # mean length of all, correct and incorrect answers
    accuracy: LineChart
    rows: tuple[DifficultyRow, ...]
    stepwise: LineChart  # step-by-step share, one line per difficulty
    skipped: str | None  # why the curves start after the path's first stage, if they do


def _series(along: Along, metric: str, n: int | None = None) -> list[tuple[int, float | None]]:
    return [(x, getattr(p.stats if n is None else dict(p.by_difficulty)[n], metric)) for x, _s, p in along.points]


def build_length_view(result: PathResult) -> LengthView:
    along = along_path(result)
    first, last = along.points[0][2], along.points[-1][2]
    start_by, end_by = dict(first.by_difficulty), dict(last.by_difficulty)
    extra, stage_marks = marks_caption(along).strip(), marks(along)

    def chart(key: str, title: str, y_label: str, spec: list, fixed: tuple[float, float] | None) -> LineChart:
        # labels right of the plot: lines that end close together would cover labels set inside
        return line_chart(key, title, y_label, spec, fixed, *PAIR_SIZE, x_label=X_LABEL, caption=extra,
                          marks=stage_marks, gutter=True, legend=False)

    length = chart("lm-fig3-length", "Mean length of answers", "tokens",
                   [("mean_length", "all", _series(along, "mean_length")),
                    ("mean_length_correct", "correct", _series(along, "mean_length_correct")),
                    ("mean_length_incorrect", "incorrect", _series(along, "mean_length_incorrect"))], None)
    accuracy = chart("lm-fig3-accuracy", "Accuracy", "share right",
                     [("accuracy", "accuracy", _series(along, "accuracy"))], (0.0, 1.0))
    sizes = sorted(set(start_by) & set(end_by))
    rows = tuple(DifficultyRow(n, f"{pct(start_by[n].accuracy)} → {pct(end_by[n].accuracy)}",
                               f"{pct(start_by[n].stepwise_share)} → {pct(end_by[n].stepwise_share)}",
                               f"{tokens(start_by[n].mean_length_correct)} → {tokens(end_by[n].mean_length_correct)}")
                 for n in sizes)
    stepwise = chart("lm-stepwise-by-difficulty", "Step-by-step answers by difficulty", "share step by step",
                     [(f"n{n}", f"{n} numbers", _series(along, "stepwise_share", n)) for n in sizes], (0.0, 1.0))
    label, why = reading(result.path, first.stats, last.stats)
    if result.path == "r1-zero":
        why += growth_pace(along)
    return LengthView(headline(first.stats, last.stats, start_by, end_by), label, why, length, accuracy, rows,
                      stepwise, along.skipped)
