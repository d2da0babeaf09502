"""`python -m app open RUN_DIR --follow` (issue 50): a run folder read as it grows, under one id.

A writer thread appends steps to a TRL folder (rewriting trainer_state.json in place, half of it first, as TRL's
non-atomic write may be seen) while the follower runs: each new step is stored within 5 s, under the same id, with
no refusal said and one stored copy kept. A half-written trainer_state.json is neither refused nor stored, and is read
once whole; a file broken for good is said once it settles. A prime-rl step folder is read only once its STABLE
marker lands. The command itself prints one line per update and stops cleanly on Ctrl-C; the explorer's status route
answers a tiny fragment, with `HX-Trigger: run-grew` only when the version moved, and stops polling once the
follower is gone."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from run_fixtures import entry, state
from test_trl_completions import table, write
from token_fixtures import prime_rl_line, random_seq, write_prime_rl

from app.domain.uploads import UploadStore
from app.runs.domain.run_follow import STALE_S, follow_id
from app.runs.engine.run_follower import Follower
from app.runs.web.run_pages import store_for
from app.web.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def document(n: int) -> str:
    return json.dumps(state([entry(s) for s in range(1, n + 1)], close=False))


@pytest.fixture
def stores(tmp_path):
    data = tmp_path / "data"
    uploads = UploadStore.open(data, None, quota_mb=100, cache_mb=0)
    yield data, store_for(Settings(data_dir=data), uploads.backend), uploads
    uploads.close()


def follower(folder, stores, said, **kw) -> Follower:
    _, runs, uploads = stores
    return Follower(folder, runs, uploads, say=said.append, **{"cpu_share": 1e6, **kw})  # no pause between looks


def stored_runs(data: Path) -> list[str]:
    return sorted(p.name for p in (data / "runs").glob("*.json"))


def test_a_growing_folder_is_followed_under_one_id(tmp_path, stores):
    data, runs, _ = stores
    out = tmp_path / "out"
    out.mkdir()
    said: list[str] = []
    f = follower(out, stores, said, settle=3.0, cpu_share=0.04)  # as the command runs it
    assert f.id == follow_id(out) == follow_id(tmp_path / "." / "out")  # the folder's, however it is named
    stop = threading.Event()
    thread = threading.Thread(target=f.run, args=(0.2, stop.is_set), daemon=True)
    thread.start()
    try:
        for n in range(1, 8):
            text = document(n)
            with open(out / "trainer_state.json", "w") as fh:  # TRL's own write: not atomic
                fh.write(text[: len(text) // 2])
                fh.flush()
                time.sleep(0.25)  # a follower's look lands on the half file
                fh.write(text[len(text) // 2:])
            deadline = time.monotonic() + 5
            while (log := runs.get(f.id)) is None or len(log.steps) < n:
                assert time.monotonic() < deadline, f"step {n} not stored within 5 s: {said}"
                time.sleep(0.05)
            assert log.steps[-1] == n
    finally:
        stop.set()
        thread.join(10)
    assert not [line for line in said if "error" in line], said
    # a first look may land before the first file exists ("waiting for … to hold a run's files"): said, not an update
    updates = [line for line in said if line.startswith("update ")]
    assert not [line for line in said if line not in updates and not line.startswith("waiting for ")], said
    assert updates[0].startswith("update 1: 1 step (+1)") and any(line.startswith("update 7: 7 steps (+") for line in updates)
    assert len(stored_runs(data)) == 1  # each version replaces the one before: one copy against the quota
    followed = runs.follows.read(f.id)
    assert followed is not None and followed.ended and followed.steps == 7 and followed.owned


def test_a_half_written_state_is_never_refused_and_is_read_once_whole(tmp_path, stores):
    data, runs, _ = stores
    out = tmp_path / "out"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(3))
    said: list[str] = []
    f = follower(out, stores, said, settle=3.0)
    assert f.poll() and runs.get(f.id).steps[-1] == 3
    whole = document(4)
    (out / "trainer_state.json").write_text(whole[: len(whole) // 2])
    assert not f.poll() and not f.poll()  # within the settle time: skipped, nothing said
    assert said == [said[0]] and runs.get(f.id).steps[-1] == 3 and len(stored_runs(data)) == 1
    assert runs.follows.read(f.id).version == 1
    (out / "trainer_state.json").write_text(whole)
    assert f.poll() and runs.get(f.id).steps[-1] == 4 and said[-1].startswith("update 2: 4 steps (+1)")
    # a file broken for good: said once it has settled, and once only
    (out / "trainer_state.json").write_text(whole[:-7])
    later = follower(out, stores, said, settle=3.0, clock=lambda: time.time() + 10)
    n = len(said)
    later.poll()
    later.poll()
    later.poll()
    errors = [line for line in said[n:] if line.startswith("error:")]
    assert len(errors) == 1 and "trainer_state.json" in errors[0], said[n:]
    assert runs.get(f.id).steps[-1] == 4  # the version before stays


def test_each_new_checkpoint_is_read_under_the_same_id(tmp_path, stores):
    """TRL writes trainer_state.json into each checkpoint-N/ (after the weights) and the top-level one at the end."""
    data, runs, _ = stores
    out = tmp_path / "out"
    said: list[str] = []
    f = follower(out, stores, said)
    out.mkdir()
    assert not f.poll() and said == [f"waiting for {out} to hold a run's files"]
    for n in (2, 4, 6):
        (out / f"checkpoint-{n}").mkdir()
        (out / f"checkpoint-{n}" / "model.safetensors").write_bytes(b"\0" * 64)  # weights first: not read
        assert not f.poll()  # a checkpoint of weights alone: nothing new to store
        (out / f"checkpoint-{n}" / "trainer_state.json").write_text(document(n))
        assert f.poll() and list(runs.get(f.id).steps) == list(range(1, n + 1))
    (out / "trainer_state.json").write_text(document(7))
    assert f.poll() and runs.get(f.id).steps[-1] == 7
    assert said[-1].startswith("update 4: 7 steps (+1), last step 7") and len(stored_runs(data)) == 1


def test_a_parquet_without_its_footer_is_read_once_whole(tmp_path, stores):
    _, runs, _ = stores
    out = tmp_path / "out"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(2))
    whole = write(out, 2, table(2, 8)).read_bytes()
    path = out / "completions" / "completions_00002.parquet"
    path.write_bytes(whole[: len(whole) // 2])  # no footer yet
    said: list[str] = []
    f = follower(out, stores, said, settle=3.0)
    assert f.poll() and not [line for line in said if "error" in line], said
    assert not any(name.startswith("samples/") for name in runs.get(f.id).names)
    assert not f.poll()  # looked at again, still being written: nothing said
    path.write_bytes(whole)
    assert f.poll() and any(name.startswith("samples/") for name in runs.get(f.id).names)
    assert not [line for line in said if "error" in line], said


def test_a_prime_rl_step_is_read_only_once_stable(tmp_path, stores):
    _, runs, _ = stores
    out = tmp_path / "out"
    rng = np.random.default_rng(1)
    write_prime_rl(out, {1: [[random_seq(rng) for _ in range(2)]]})
    said: list[str] = []
    f = follower(out, stores, said)
    assert f.poll() and list(runs.get(f.id).steps) == [1]
    step2 = out / "token_exports" / "step_2"
    step2.mkdir()
    lines = [json.dumps(prime_rl_line(random_seq(rng), 2, 0, i)) for i in range(2)]
    (step2 / "rank_0.jsonl").write_text("".join(line + "\n" for line in lines))
    assert not f.poll() and list(runs.get(f.id).steps) == [1]
    assert said[-1] == "waiting for token_exports/step_2/STABLE (prime-rl marks a step once every rank flushed)"
    (step2 / "STABLE").touch()
    assert f.poll() and list(runs.get(f.id).steps) == [1, 2]
    assert not [line for line in said if "error" in line]


def _lines(proc: subprocess.Popen) -> queue.Queue:
    got: queue.Queue = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            got.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return got


def _until(got: queue.Queue, prefix: str, timeout: float = 30) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while True:
        line = got.get(timeout=max(0.1, deadline - time.monotonic()))
        seen.append(line)
        if line.startswith(prefix):
            return seen


def test_the_command_prints_an_update_per_change_and_stops_on_ctrl_c(tmp_path, make_client):
    data, out = tmp_path / "data", tmp_path / "out"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(2))
    env = {**os.environ, "DATA_DIR": str(data)}
    proc = subprocess.Popen([sys.executable, "-m", "app", "open", str(out), "--follow", "--interval", "0.2",
                             "--port", "8125"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        got = _lines(proc)
        head = _until(got, "update 1:")
        fid = follow_id(out)
        assert head[-3:] == [f"following {out} every 0.2 s as run {fid} (Ctrl-C to stop)",
                             f"open http://127.0.0.1:8125/runs/{fid}", "update 1: 2 steps (+2), last step 2, "
                             "0 recorded, 1 finding; new finding: clip_never"]
        client = make_client(data_dir=data)
        page = client.get(f"/runs/{fid}")
        assert page.status_code == 200 and "<strong>Following</strong>" in page.text
        assert f'hx-get="/runs/{fid}/follow?v=1"' in page.text and 'hx-trigger="every 2s"' in page.text
        assert '<meta http-equiv="refresh" content="5">' in page.text  # inside <noscript>: no script only
        (out / "trainer_state.json").write_text(document(5))
        assert _until(got, "update 2:")[-1].startswith("update 2: 5 steps (+3), last step 5")
        same = client.get(f"/runs/{fid}/follow?v=2")
        assert same.status_code == 200 and "HX-Trigger" not in same.headers and len(same.content) < 1000
        assert "5 steps (to step 5)" in same.text
        moved = client.get(f"/runs/{fid}/follow?v=1")
        assert moved.headers["HX-Trigger"] == "run-grew" and moved.headers["Cache-Control"] == "no-store"
        assert client.get(f"/runs/{fid}").text.count("logged steps") >= 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
        assert _until(got, "stopped following")[-1] == f"stopped following {out} after 2 updates"
        ended = client.get(f"/runs/{fid}/follow?v=2")
        assert "ended" in ended.text and "hx-trigger" not in ended.text  # no more polling
        assert client.get("/runs/0123456789abcdef/follow").status_code == 404
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_silent_follower_is_no_longer_following(tmp_path, stores):
    _, runs, _ = stores
    out = tmp_path / "out"
    out.mkdir()
    (out / "trainer_state.json").write_text(document(2))
    f = follower(out, stores, [])
    f.poll()
    followed = runs.follows.read(f.id)
    assert followed.following(time.time()) and not followed.following(followed.heartbeat + STALE_S + 1)
