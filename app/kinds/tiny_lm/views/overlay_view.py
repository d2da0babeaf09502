"""The three training paths on one chart per metric: every path whose run is done,
each in its own line style on every chart, with a line of start → end numbers each; the others'
runs are started and their progress shown until they are done."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.training_paths import PATH_IDS
from app.kinds.tiny_lm.engine.lm_paths import PATH_TITLES, PathResult
from app.kinds.tiny_lm.views.length_view import X_LABEL, along_path, pct, tokens
from app.stores.jobs import JobRecord
from app.views.charts.line_charts import LineChart, line_chart

# (metric, title, y label, fixed range); the length ones first: what the box is about
OVERLAY_METRICS = (
    ("accuracy", "Accuracy", "share right", (0.0, 1.0)),
    ("mean_length", "Mean length of answers", "tokens", None),
    ("mean_length_correct", "Length of correct answers", "tokens", None),
    ("mean_length_incorrect", "Length of incorrect answers", "tokens", None),
    ("stepwise_share", "Step-by-step answers", "share", (0.0, 1.0)),
    ("format_rate", "Format kept", "share", (0.0, 1.0)),
    ("mixed_rate", "Mixed-script answers", "share", (0.0, 1.0)),
    ("recheck_share", "Answers with a re-check", "share", (0.0, 1.0)),
    ("entropy", "Entropy", "nats per token", None),
    ("kl_to_reference", "KL to the reference", "nats per token", None),
)


def short(path: str) -> str:
    return PATH_TITLES[path].split(":")[0]


@dataclass(frozen=True)
class OverlayEntry:
    path: str
    title: str
    job: JobRecord
    result: PathResult | None
    url: str  # the path's own box (its "Try again" is there when it failed)

    @property
    def percent(self) -> int:
        return round(100 * self.job.fraction)

    @property
    def line(self) -> str:
        """Start → end of the headline's numbers, for this path."""
        if self.result is None:
            return ""
        points = along_path(self.result).points
        a, b = points[0][2].stats, points[-1][2].stats
        return (f"accuracy {pct(a.accuracy)} → {pct(b.accuracy)}, mean length {tokens(a.mean_length)} → "
                f"{tokens(b.mean_length)} tokens, step by step {pct(a.stepwise_share)} → {pct(b.stepwise_share)}, "
                f"over {points[-1][0]} optimiser steps")


@dataclass(frozen=True)
class OverlayView:
    entries: tuple[OverlayEntry, ...]
    charts: tuple[LineChart, ...]

    @property
    def done(self) -> tuple[OverlayEntry, ...]:
        return tuple(e for e in self.entries if e.result is not None)

    @property
    def waiting(self) -> tuple[OverlayEntry, ...]:
        return tuple(e for e in self.entries if e.result is None)

    @property
    def running(self) -> bool:
        return any(e.job.state in ("queued", "running") for e in self.entries)


def overlay_charts(results: dict[str, PathResult]) -> tuple[LineChart, ...]:
    """One chart per metric; a path keeps its style (its index in PATH_IDS) on every chart."""
    shown = [p for p in PATH_IDS if p in results]
    if not shown:
        return ()
    lines = {p: along_path(results[p]).points for p in shown}
    return tuple(
        line_chart(f"lm-overlay-{metric}", title, label,
                   [(p, short(p), [(x, getattr(pt.stats, metric)) for x, _s, pt in lines[p]]) for p in shown],
                   fixed, 340, 196, x_label=X_LABEL, styles=[PATH_IDS.index(p) for p in shown],
                   gutter=True, legend=False, caption="Each path along its own optimiser steps.")
        for metric, title, label, fixed in OVERLAY_METRICS)


def build_overlay(jobs: dict[str, JobRecord], results: dict[str, PathResult | None],
                  urls: dict[str, str]) -> OverlayView:
    entries = tuple(OverlayEntry(p, PATH_TITLES[p], jobs[p], results.get(p), urls[p]) for p in PATH_IDS if p in jobs)
    done = {e.path: e.result for e in entries if e.result is not None}
    return OverlayView(entries, overlay_charts(done))
