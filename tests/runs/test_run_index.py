"""A run directory is indexed once (issue 34): opened again with the same per-token and per-sample files, no file
is read (the readers are replaced by ones that fail) and the run is the same, number for number; a file changed,
added or removed, or an index entry that is not whole, and the directory is read again."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from run_fixtures import healthy
from test_token_runs import opened, prime_run
from test_trl_completions import table, write
from token_fixtures import random_seq, write_prime_rl

from app.runs.engine import run_opening


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _no_reading(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("a file was read again")
    monkeypatch.setattr(run_opening, "read_token_run", refuse)
    monkeypatch.setattr(run_opening, "read_completions_dir", refuse)


def _api(make_client, data_dir, url):
    return make_client(data_dir=data_dir).get("/api" + url).json()


def test_a_directory_opened_again_reads_no_file(tmp_path, capsys, data_dir, make_client, monkeypatch):
    out_dir = tmp_path / "out"
    prime_run(out_dir)
    (out_dir / "trainer_state.json").write_text(json.dumps(healthy(8)))
    for s in (2, 4):
        write(out_dir, s, table(s, 8, seed=s))
    first, _, url = opened(capsys, out_dir)
    assert not any("from the index" in line for line in first)
    before = _api(make_client, data_dir, url)
    _no_reading(monkeypatch)
    again, _, url_again = opened(capsys, out_dir)
    assert url_again == url and again[0].startswith("already stored run ")
    assert again[1].startswith("per-token and per-sample files unchanged since they were read")
    assert "per-token files (prime-rl): 16 read, 8 steps" in again[2]
    assert any(line.startswith("completions tables (TRL): 2 read, 2 steps") for line in again)
    assert _api(make_client, data_dir, url) == before
    assert {k for k in before["metrics"] if k.startswith(("tokens/", "samples/"))}  # the index held them all


def test_a_directory_of_per_token_files_alone_opens_again_from_the_index(tmp_path, capsys, data_dir, monkeypatch):
    prime_run(tmp_path / "out")
    _, _, url = opened(capsys, tmp_path / "out")
    _no_reading(monkeypatch)
    again, _, url_again = opened(capsys, tmp_path / "out")
    assert url_again == url  # the same numbers make the same stored file, hence the same run
    assert again[0].startswith("already stored run ")


def test_a_changed_added_or_removed_file_is_read_again(tmp_path, capsys, data_dir, make_client):
    out_dir = tmp_path / "out"
    prime_run(out_dir)
    (out_dir / "trainer_state.json").write_text(json.dumps(healthy(9)))
    _, _, url = opened(capsys, out_dir)
    seqs, mean = "tokens/sequences", "tokens/mismatch_mean"
    assert dict(_api(make_client, data_dir, url)["metrics"][seqs]["points"])[3] == 3

    rank0 = out_dir / "token_exports" / "step_3" / "rank_0.jsonl"
    lines = rank0.read_text().splitlines()
    rank0.write_text(lines[0] + "\n")  # one sequence fewer: step 3's numbers move
    out, _, _ = opened(capsys, out_dir)
    assert not any("from the index" in line for line in out)
    assert dict(_api(make_client, data_dir, url)["metrics"][seqs]["points"])[3] == 2

    write_prime_rl(out_dir, {9: [[random_seq(np.random.default_rng(9))]]})  # a new step's file
    out, _, _ = opened(capsys, out_dir)
    assert "per-token files (prime-rl): 17 read, 9 steps" in out[1]
    assert dict(_api(make_client, data_dir, url)["metrics"][mean]["points"]).get(9) is not None

    (out_dir / "token_exports" / "step_9" / "rank_0.jsonl").unlink()
    out, _, _ = opened(capsys, out_dir)
    assert "per-token files (prime-rl): 16 read, 8 steps" in out[1]


def test_a_touched_file_is_read_again(tmp_path, capsys, data_dir, monkeypatch):
    prime_run(tmp_path / "out")
    opened(capsys, tmp_path / "out")
    rank = tmp_path / "out" / "token_exports" / "step_1" / "rank_1.jsonl"
    st = rank.stat()
    os.utime(rank, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # same size, a later time
    calls = []
    real = run_opening.read_token_run
    monkeypatch.setattr(run_opening, "read_token_run", lambda root: calls.append(root) or real(root))
    opened(capsys, tmp_path / "out")
    assert calls == [tmp_path / "out"]


def test_an_index_entry_that_is_not_whole_is_read_again(tmp_path, capsys, data_dir):
    prime_run(tmp_path / "out")
    _, _, url = opened(capsys, tmp_path / "out")
    entries = list((data_dir / "runs" / "index").glob("tokens-*.json"))
    assert len(entries) == 1
    entries[0].write_text('{"files": {')  # cut short
    again, _, url_again = opened(capsys, tmp_path / "out")
    assert url_again == url and not any("from the index" in line for line in again)
    assert json.loads(entries[0].read_text())["value"]["files"] == 16  # written whole again


def test_a_refusal_is_said_again_on_every_opening(tmp_path, capsys, data_dir):
    prime_run(tmp_path / "out")
    (tmp_path / "out" / "trainer_state.json").write_text(json.dumps(healthy(8)))
    bad = tmp_path / "out" / "token_exports" / "step_2" / "rank_0.jsonl"
    bad.write_text("{not json\n")
    for _ in range(2):
        _, err, _ = opened(capsys, tmp_path / "out", code=1)
        assert str(bad) in err and "(step 2 left out)" in err
    assert not list((data_dir / "runs" / "index").glob("tokens-*.json"))


def test_an_entry_written_by_an_older_token_reader_is_read_again(tmp_path, capsys, data_dir):
    """The per-token readers learned the IS correction's gradient effect (tokens/is_grad/...): a directory indexed
    before, under the old entry name, is read again, so its run gains them instead of opening without them."""
    out_dir = tmp_path / "out"
    prime_run(out_dir)
    opened(capsys, out_dir)
    index = run_opening.ReadIndex(data_dir / "runs" / "index")
    files = run_opening.fingerprint(out_dir, (e.path for e in run_opening.find_token_exports(out_dir)))
    newest = index.get(out_dir, run_opening.TOKENS_INDEX, files)
    assert newest is not None and any("/is_grad/" in k for v in newest["metrics"].values() for k in v)
    stale = {**newest, "metrics": {s: {k: v for k, v in m.items() if "/is_grad/" not in k}
                                   for s, m in newest["metrics"].items()}}
    index.put(out_dir, "tokens", files, stale)  # what the reader before kept, under its name
    index.root.joinpath(index._path(out_dir, run_opening.TOKENS_INDEX).name).unlink()
    again, _, _ = opened(capsys, out_dir)
    assert not any("from the index" in line or "unchanged since" in line for line in again)
    assert index.get(out_dir, run_opening.TOKENS_INDEX, files) == newest
