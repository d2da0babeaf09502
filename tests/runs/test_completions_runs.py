"""TRL's completions tables opened with their run (issue 34): `python -m app open OUTPUT_DIR` reads
completions/completions_*.parquet beside trainer_state.json into per-step samples/… metrics that join the
log's, says it is a sequence-level source and what it lacks, names a refused table by path (the rest stored,
exit 1), and a directory of tables alone opens as a run of them. Values against numpy in float64
(test_trl_completions.expected)."""
from __future__ import annotations

import json

import pytest
from run_fixtures import healthy
from test_token_runs import opened
from test_trl_completions import expected, table, write


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_tables_beside_a_trl_log_join_its_metrics(tmp_path, capsys, data_dir, make_client):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "trainer_state.json").write_text(json.dumps(healthy(12)))
    tables = {s: table(s, 16, seed=s) for s in (3, 6, 9, 12)}
    for s, columns in tables.items():
        write(out_dir, s, columns)
    out, _, url = opened(capsys, out_dir)
    line = next(x for x in out if x.startswith("completions tables (TRL)"))
    assert line.startswith("completions tables (TRL): 4 read, 4 steps with samples/… metrics")
    assert "it holds no per-token log-probs" in line
    api = make_client(data_dir=data_dir).get("/api" + url).json()
    for s, columns in tables.items():
        want = expected(columns)
        for name, value in want.items():
            got = dict(api["metrics"][name]["points"])[s]
            assert got == pytest.approx(value, rel=1e-12, abs=1e-12), (s, name)
    assert api["metrics"]["reward"]["logged"] == 12  # the log's own metrics are untouched


def test_a_refused_table_is_named_by_path_and_the_rest_stored(tmp_path, capsys, data_dir, make_client):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "trainer_state.json").write_text(json.dumps(healthy(6)))
    write(out_dir, 2, table(2, 8))
    bad = write(out_dir, 4, table(4, 8, step=[5] * 8))  # a file of step 4 whose rows say 5
    out, err, url = opened(capsys, out_dir, code=1)
    assert f"error: {bad}: step" in err and "(step 4 left out)" in err
    api = make_client(data_dir=data_dir).get("/api" + url).json()
    assert api["metrics"]["samples/count"]["points"] == [[2, 8.0]]


def test_a_directory_of_tables_alone_opens_as_a_run_of_them(tmp_path, capsys, data_dir, make_client):
    out_dir = tmp_path / "out"
    for s in (1, 2, 3):
        write(out_dir, s, table(s, 8, seed=s))
    out, _, url = opened(capsys, out_dir)
    assert "3 logged steps (1 to 3)" in out[0]
    client = make_client(data_dir=data_dir)
    assert client.get(url + "?step=2").status_code == 200
    series = dict(client.get("/api" + url).json()["metrics"]["samples/reward_mean"]["points"])
    assert series[2] == pytest.approx(expected(table(2, 8, seed=2))["samples/reward_mean"], rel=1e-12)
