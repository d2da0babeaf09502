"""What the run explorer's speed-ups (issue 50) must not change: the numpy M4 cut keeps exactly the points the
per-point rule keeps (ties to the first, every non-finite point), a log's memoised series and findings are the
ones computed afresh, and a kept view is the one explorer() builds for that id, query and recorded steps."""
from __future__ import annotations

import math
import random

from run_fixtures import entry, state

from app.runs.domain.run_findings import findings
from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.run_series import downsample
from app.runs.views.run_view import RunQuery, explorer
from app.runs.views.run_view_cache import VIEWS_PER_LOG, cached_explorer


def reference(points, buckets):
    """M4 point by point, as run_series.py did it before numpy."""
    n = len(points)
    if n <= 4 * buckets:
        return list(points)
    keep: set[int] = set()
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        finite = [i for i in range(lo, hi) if math.isfinite(points[i][1])]
        keep.update((lo, hi - 1))
        keep.update(i for i in range(lo, hi) if not math.isfinite(points[i][1]))
        if finite:
            keep.add(min(finite, key=lambda i: points[i][1]))
            keep.add(max(finite, key=lambda i: points[i][1]))
    return [points[i] for i in sorted(keep)]


def test_the_numpy_cut_keeps_the_points_the_per_point_rule_keeps():
    rng = random.Random(50)
    pool = [0.0, -0.0, 1.0, 1.0, math.nan, math.inf, -math.inf]  # ties, signed zeros, every non-finite kind
    for trial in range(120):
        n, buckets = rng.choice([601, 1000, 1234, 10_000]), rng.choice([1, 7, 150])
        points = [(s, rng.choice(pool) if rng.random() < 0.3 else rng.gauss(0, 1)) for s in range(n)]
        if trial % 10 == 0:
            points = [(s, math.nan) for s in range(n)]  # buckets with no finite point
        got, want = downsample(points, buckets), reference(points, buckets)
        assert [s for s, _ in got] == [s for s, _ in want], trial
        assert all(a is b for a, b in zip(got, want, strict=True))  # the very points, -0.0 and NaN included


def test_a_logs_series_and_findings_are_computed_once_and_unchanged():
    log = read_trainer_state(state([entry(s, loss=0.0 if s > 5 else 0.1) for s in range(1, 41)]))
    assert log.series("loss") is log.series("loss")
    assert log.series("loss") == tuple((s, 0.0 if s > 5 else 0.1) for s in range(1, 41))
    first = findings(log)
    first.clear()  # a caller's list is its own
    again = findings(log)
    assert again and again == findings(read_trainer_state(state([entry(s, loss=0.0 if s > 5 else 0.1)
                                                                 for s in range(1, 41)])))


def test_a_kept_view_is_explorers_for_the_same_id_query_and_records_and_only_the_last_few_are_kept():
    log = read_trainer_state(state([entry(s) for s in range(1, 301)]))
    first = cached_explorer("0123456789abcdef", log, RunQuery(step=7))
    assert first == explorer("0123456789abcdef", log, RunQuery(step=7))
    assert cached_explorer("0123456789abcdef", log, RunQuery(step=7)) is first  # warm: not built again
    linked = cached_explorer("0123456789abcdef", log, RunQuery(step=7), {7: "w1"})  # a record linked since
    assert linked is not first and linked.selected is not None and linked.selected.record is not None
    assert cached_explorer("fedcba9876543210", log, RunQuery(step=7)).whole_url != first.whole_url  # another id
    for step in range(VIEWS_PER_LOG + 1):  # more views than are kept: the oldest goes
        cached_explorer("0123456789abcdef", log, RunQuery(step=100 + step))
    assert cached_explorer("0123456789abcdef", log, RunQuery(step=7)) is not first
    fresh = read_trainer_state(state([entry(s) for s in range(1, 301)]))  # a log read again: its own views
    assert cached_explorer("0123456789abcdef", fresh, RunQuery(step=7)) is not first


def test_a_kept_compare_view_is_drawn_again_for_a_log_read_again(make_client, tmp_path):
    from compare_fixtures import three_runs

    from app.runs.web import run_compare_pages

    client = make_client(data_dir=tmp_path)
    ids = three_runs(client.app, tmp_path / "runs")
    url = "/runs/compare?" + "&".join(f"run={i}" for i in ids)
    first = client.get(url)
    assert first.status_code == 200
    kept = next(v for (q, _), v in run_compare_pages._VIEWS.items() if q.ids == tuple(ids))
    assert client.get(url).text == first.text
    assert next(v for (q, _), v in run_compare_pages._VIEWS.items() if q.ids == tuple(ids)) is kept  # warm: kept
    client.app.state.run_store._logs.clear()  # the logs read again: new objects, so the view is drawn again
    assert client.get(url).text == first.text
    assert next(v for (q, _), v in run_compare_pages._VIEWS.items() if q.ids == tuple(ids)) is not kept
