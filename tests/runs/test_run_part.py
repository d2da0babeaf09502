"""A run's recorded step, opened as its own walkthrough, knows its run (issue 49, item 10): the store finds the
run that links it (files only, and rows in the upload database), and the step panel's links lead back to the
run at that step and on to the recorded steps beside it; the last recorded step leads back to the run."""
from __future__ import annotations

import json

from run_fixtures import healthy

from app.runs.domain.run_store import RunStore
from app.runs.views.run_part import run_part
from app.stores.uploads import open_backend

LINKS = {30: "aaaaaaaaaaaaaaaa", 60: "bbbbbbbbbbbbbbbb", 90: "cccccccccccccccc"}


def stored(store: RunStore, n: int = 120) -> str:
    ident, _ = store.add(json.dumps(healthy(n)).encode())
    store.link_records(ident, LINKS)
    return ident


def test_the_run_that_recorded_a_step_is_found_in_files(tmp_path):
    store = RunStore(tmp_path / "runs")
    ident = stored(store)
    other, _ = store.add(json.dumps(healthy(40)).encode())   # a run with no recorded step
    assert store.recording("bbbbbbbbbbbbbbbb") == (ident, 60, LINKS)
    assert store.recording("dddddddddddddddd") is None
    assert other != ident


def test_the_run_that_recorded_a_step_is_found_in_rows(tmp_path):
    backend = open_backend(tmp_path / "data", None)
    try:
        store = RunStore(tmp_path / "data" / "runs", refs=backend)
        ident = stored(store)
        assert RunStore(tmp_path / "data" / "runs", refs=backend).recording("cccccccccccccccc") == (ident, 90, LINKS)
    finally:
        backend.close()


def test_the_links_lead_back_to_the_run_and_on_to_its_neighbours():
    middle = run_part("0123456789abcdef", 60, LINKS)
    assert middle.home.url == "/runs/0123456789abcdef?step=60#selected-step"
    assert middle.previous is not None and middle.previous.url == "/walkthroughs/aaaaaaaaaaaaaaaa"
    assert middle.next is not None and middle.next.url == "/walkthroughs/cccccccccccccccc"
    assert "60" in middle.label and "2 of 3" in middle.label
    first, last = run_part("0123456789abcdef", 30, LINKS), run_part("0123456789abcdef", 90, LINKS)
    assert first.previous is None and last.next is None
