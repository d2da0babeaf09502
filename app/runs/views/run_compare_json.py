"""The run compare's JSON twin (`GET /api/runs/compare`): the same runs, config diff, overlaid metrics and findings as
the page (views/run_compare.py), as numbers: each metric's (x, value) points per run cut by the same M4 rule,
"nan"/"inf" as strings (JSON has none), a config key a run lacks left out of that run's values."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from app.runs.domain.run_config import MISSING, RunConfig, diff
from app.runs.domain.run_log import RunLog
from app.runs.views.run_compare import LETTERS, RunCompare, cut, run_findings
from app.runs.views.run_compare_query import CompareQuery


def _number(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)


def _by_run(values: Sequence[Any], labels: str) -> dict[str, Any]:
    return {labels[i]: v for i, v in enumerate(values) if v is not MISSING}


def compare_body(q: CompareQuery, runs: Sequence[tuple[str, RunLog]], configs: Sequence[RunConfig],
                 view: RunCompare) -> dict[str, Any]:
    labels = LETTERS[:len(runs)]
    d = diff(configs)
    metrics: dict[str, dict[str, Any]] = {}
    for name, having in ((c.key, [ln.index for ln in c.lines]) for s in view.sections for c in s.charts):
        metrics[name] = {}
        for i in having:
            kept, logged = cut(runs[i][1], name, q.x)
            metrics[name][labels[i]] = {"logged": logged, "points": [[x, _number(v)] for x, v in kept]}
    return {
        "x": q.x, "x_note": view.x_note or None,
        "runs": [{"label": r.label, "id": r.id, "url": r.url, "steps": {
                      "first": runs[r.index][1].steps[0] if runs[r.index][1].steps else None,
                      "last": runs[r.index][1].steps[-1] if runs[r.index][1].steps else None,
                      "count": len(runs[r.index][1].steps)},
                  "num_tokens": r.has_tokens, "config_source": r.config_source,
                  "config": configs[r.index].values} for r in view.runs],
        "config": {"differ": {row.key: _by_run(row.values, labels) for row in d.differ},
                   "same": {row.key: row.values[0] for row in d.same},
                   "partial": {row.key: _by_run(row.values, labels) for row in d.partial}},
        "metrics": metrics,
        "only_in": {name: list(o.labels) for o in view.only_in for name in o.names},
        "findings": {labels[i]: [{**dataclasses.asdict(f), "numbers": {k: _number(v) for k, v in f.numbers.items()}}
                                 for f in run_findings(log)] for i, (_, log) in enumerate(runs)},
        "page": view.api_url.removeprefix("/api"),
    }


__all__ = ["compare_body"]
