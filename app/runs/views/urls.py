"""The runs' own links: a run's explorer, its JSON and two of its recorded steps compared."""
from __future__ import annotations

from collections.abc import Mapping

from app.views.urls import segment, with_query


def run(run_id: str, query: Mapping[str, str | int] | None = None) -> str:
    """A run's explorer (issue 34): `from`/`to` zoom to a window of steps, `step` selects one."""
    return with_query(f"/runs/{segment(run_id)}", {k: str(v) for k, v in (query or {}).items()})


def run_api(run_id: str) -> str:
    return f"/api/runs/{segment(run_id)}"


def run_diff_action(run_id: str) -> str:
    """Two recorded steps of a run compared; the GET form's action (it adds `a` and `b`)."""
    return f"/runs/{segment(run_id)}/diff"


def run_diff(run_id: str, a: int, b: int) -> str:
    return with_query(run_diff_action(run_id), {"a": str(a), "b": str(b)})


def run_diff_api(run_id: str, a: int, b: int) -> str:
    return with_query(f"/api/runs/{segment(run_id)}/diff", {"a": str(a), "b": str(b)})
