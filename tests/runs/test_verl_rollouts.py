"""verl's rollout dumps (issue 34): `trainer.rollout_data_dir` writes `{global_steps}.jsonl`, one line per response
(verl 0.9.1, RayPPOTrainer._write_generations: input, output, gts, score, step, then each reward-extra-info column).
rollout_fixtures.write_rollouts writes them the way that function does (json.dumps(entry, ensure_ascii=False,
default=str));
peers/test_verl_rollouts.py calls verl's own function. Every number against a float64 computation in numpy; a
refused file is named by path, line and field, its step left out, nothing 5xx; the dumps open as a run of their own
or beside a TRL-shaped log, and a second opening reads nothing."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rollout_fixtures import batch, expected, write_rollouts
from run_fixtures import healthy
from test_token_runs import opened

from app.runs.domain.verl_rollouts import read_rollouts_dir
from app.runs.engine import run_opening


def test_every_number_equals_numpy_in_float64(tmp_path):
    rng = np.random.default_rng(7)
    want = {}
    for step in (1, 2, 10):
        inputs, outputs, scores = batch(rng, tie=(0, 2) if step == 2 else (0,))
        if step == 10:
            scores[3] = float("nan")  # json.dumps writes NaN: an unscorable response
        extra = {"acc": [float(x > 0.5) for x in scores], "pred": ["7"] * len(scores), "request_id": list(range(16))}
        write_rollouts(tmp_path, step, inputs, outputs, scores, extra)
        want[step] = expected(inputs, outputs, scores, {"acc": extra["acc"], "request_id": extra["request_id"]})
    got = read_rollouts_dir(tmp_path)
    assert got.files == 3 and not got.refused
    assert set(got.metrics) == {1, 2, 10}  # steps by number, not by name order ("10" < "2")
    for step, values in want.items():
        assert set(got.metrics[step]) == set(values), step
        for name, value in values.items():
            assert got.metrics[step][name] == pytest.approx(value, rel=1e-12, abs=1e-15), (step, name)
    assert got.metrics[2]["samples/tied_group_share"] == 0.5


@pytest.mark.parametrize(("line", "where", "why"), [
    ("[1, 2]", "line 2", "expected an object"),
    ('{"input": "q", "output": "a", "score": 1.0}', "line 2: step", "missing"),
    ('{"input": "q", "output": 3, "score": 1.0, "step": 5}', "line 2: output", "decoded text"),
    ('{"input": "q", "output": "a", "score": "high", "step": 5}', "line 2: score", "expected a number"),
    ('{"input": "q", "output": "a", "score": 1.0, "step": 4}', "line 2: step", "4 in the file of step 5"),
    ('{"input": "q", "output": "a", "score": Infinity, "step": 5}', "line 2: score", "expected a number"),
    ('{"input": "q", "output": ', "line 2", "not JSON"),
])
def test_a_bad_line_is_refused_by_path_line_and_field(tmp_path, line, where, why):
    write_rollouts(tmp_path, 3, ["q", "q"], ["a", "b"], [0.0, 1.0])
    path = write_rollouts(tmp_path, 5, ["q"], ["a"], [1.0])
    path.write_text(path.read_text() + line + "\n")
    got = read_rollouts_dir(tmp_path)
    assert set(got.metrics) == {3}
    [(at, reason)] = got.refused
    assert at == f"rollout_data_dir/5.jsonl: {where}" and why in reason and "(step 5 left out)" in reason


def test_dumps_alone_open_as_a_run_and_beside_a_log_join_it(tmp_path, capsys, monkeypatch, make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    rng = np.random.default_rng(3)
    alone = tmp_path / "alone"
    for step in (1, 2, 3):
        write_rollouts(alone, step, *batch(rng), folder="rollout_data")
    out, _, url = opened(capsys, alone)
    assert "3 logged steps (1 to 3)" in out[0]
    line = next(x for x in out if x.startswith("rollout dumps (verl)"))
    assert line.startswith("rollout dumps (verl): 3 read, 3 steps with samples/… metrics")
    assert "it holds no per-token log-probs, advantages, token lengths" in line
    page = make_client(data_dir=tmp_path / "data").get(url)
    assert page.status_code == 200 and "verl&#39;s rollout dumps" in page.text
    assert "A GRPO run: 3 steps" in page.text

    beside = tmp_path / "beside"
    beside.mkdir()
    (beside / "trainer_state.json").write_text(json.dumps(healthy(4)))
    inputs, outputs, scores = batch(rng)
    write_rollouts(beside, 4, inputs, outputs, scores)
    out, _, url = opened(capsys, beside)
    api = make_client(data_dir=tmp_path / "data").get("/api" + url).json()
    for name, value in expected(inputs, outputs, scores).items():
        assert dict(api["metrics"][name]["points"])[4] == pytest.approx(value, rel=1e-12), name
    assert api["metrics"]["reward"]["logged"] == 4

    def refuse(*_a, **_k):
        raise AssertionError("read again")
    monkeypatch.setattr(run_opening, "read_rollouts_dir", refuse)
    again, _, url_again = opened(capsys, beside)
    assert url_again == url and any("from the index" in x for x in again)
    assert any(x.startswith("rollout dumps (verl): 1 read, 1 steps") for x in again)


def test_a_refused_dump_is_named_and_nothing_5xx(tmp_path, capsys, monkeypatch, make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "trainer_state.json").write_text(json.dumps(healthy(3)))
    write_rollouts(out_dir, 1, ["q", "q"], ["a", "b"], [0.0, 1.0])
    bad = write_rollouts(out_dir, 2, ["q"], ["a"], [1.0])
    bad.write_text('{"input": "q"}\n')
    _, err, url = opened(capsys, out_dir, code=1)
    assert f"error: {bad}: line 1: output: missing" in err and "(step 2 left out)" in err
    client = make_client(data_dir=tmp_path / "data")
    assert client.get(url).status_code == 200
    points = dict(client.get("/api" + url).json()["metrics"]["samples/count"]["points"])
    assert points == {1: 2} and not math.isnan(points[1])


def test_slime_rollout_pickles_are_never_read_as_verl_dumps(tmp_path):
    (tmp_path / "rollout_data").mkdir()
    (tmp_path / "rollout_data" / "0.pt").write_bytes(b"\x80\x04 a pickle")  # slime's: never opened
    got = read_rollouts_dir(tmp_path)
    assert got.files == 0 and not got.metrics and not got.refused


def test_tied_groups_in_the_dumps_are_a_finding_when_the_log_has_none(tmp_path, capsys, monkeypatch, make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    rng = np.random.default_rng(5)
    for step in (1, 2, 3):  # 3 of 4 groups tied at step 3, none at step 1
        write_rollouts(tmp_path / "out", step, *batch(rng, tie=tuple(range(step))))
    out, _, url = opened(capsys, tmp_path / "out")
    assert "- [tied_groups] At step 3, 75 % of the groups had every reward equal (samples/tied_group_share): their "\
        "advantages are 0 and they give no gradient. 2 of 3 steps had at least 50 % of their groups tied." in out
    page = make_client(data_dir=tmp_path / "data").get(url).text
    assert "Per-token numbers count" not in page  # no per-token file here
