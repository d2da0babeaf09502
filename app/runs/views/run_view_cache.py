"""The explorer's last few views of each log, kept with the log (issue 50: a warm 10,000-step page in <= 150 ms)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from app.runs.domain.run_log import RunLog
from app.runs.views.run_view import RunExplorer, RunQuery, explorer

VIEWS_PER_LOG = 4  # the views kept per log: the first view, and a few selected steps or zooms a reader went back to


def cached_explorer(run_id: str, log: RunLog, q: RunQuery, recorded: Mapping[int, str] | None = None) -> RunExplorer:
    """`explorer(...)`, kept with the log for the VIEWS_PER_LOG views asked last (issue 50: a warm 10,000-step page
    in ≤ 150 ms; building its ~45 charts is most of it). The view is a function of the log, which never changes
    once read (a followed run's new version is a new log), the id (its URLs), the query and the recorded steps,
    read per request (a record linked later changes the key); so a kept view is the one explorer() would build.
    A refused query (BadRunQuery) is raised again, never kept."""
    views: OrderedDict[tuple, RunExplorer] = log.memo("explorer_views", OrderedDict)
    key = (run_id, q, tuple(sorted((recorded or {}).items())))
    with _VIEWS_LOCK:
        view = views.get(key)
        if view is not None:
            views.move_to_end(key)
            return view
    view = explorer(run_id, log, q, recorded)
    with _VIEWS_LOCK:
        views[key] = view
        while len(views) > VIEWS_PER_LOG:
            views.popitem(last=False)
    return view


_VIEWS_LOCK = threading.Lock()


__all__ = ["VIEWS_PER_LOG", "cached_explorer"]
