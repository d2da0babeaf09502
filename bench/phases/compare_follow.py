"""Comparing runs and following one, at the issue's scale (issue 50). The third figure of the issue, the explorer of
one 10,000-step run (warm HTML ≤ 150 ms), is taken by the `run` phase on its run (phases/run.py: `run_html_*`).

- **Compare**: four runs of 10,000 logged steps (tests/runs/run_fixtures.py's `entry`: TRL's GRPO keys),
  their kl a little apart, and configs that differ a little: each folder holds one step record, the shipped example's
  step 30 with its framework_config's learning_rate and beta changed, as compare_fixtures.py does. Each is opened by
  `python -m app open` into one temporary DATA_DIR; then `python -m app` over it, and
  `GET /runs/compare?run=A&run=B&run=C&run=D` (`Accept-Encoding: gzip, br`, request sent → last byte read): the
  first request, then warm (median; target ≤ 400 ms).
- **View model**: `explorer()` for run A in this process, over a RunStore of its own (the log parsed once, as the
  server keeps it), median of the warm calls: the explorer's Python work without the template and HTTP.
- **Follow**: `python -m app open RUN_DIR --follow` (interval 1 s) over another temporary DATA_DIR while this process
  rewrites the folder's trainer_state.json once a second, whole and atomically (written beside the folder, renamed
  over it), one logged step more each time, from `follow_start` steps. The follower's CPU time (utime + stime, and
  its reaped children's, from /proc/<pid>/stat) over the writing window, which begins at its first update (its
  start-up imports are not the cost of following), over the window's wall time: a share of one core (target ≤ 5 %).
  The steps it stored (its state file, DATA_DIR/runs/follow/<id>.json) must then reach the last one written within
  CATCH_UP_S, else a problem is reported.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.common import ACCEPT_ENCODING, ROOT, get, log, median, server
from bench.phases.run import _fixture, _open

CONFIGS = ({"learning_rate": 1e-6, "beta": 0.04}, {"learning_rate": 2e-6, "beta": 0.04},
           {"learning_rate": 1e-6, "beta": 0.0}, {"learning_rate": 3e-6, "beta": 0.1})
CATCH_UP_S = 20.0  # after the last write: the follower paces its readings (engine/run_follower.py, CPU_SHARE)


def sizes(smoke: bool) -> dict:
    if smoke:
        return {"steps": 200, "compare_requests": 2, "view_calls": 2, "follow_start": 50, "follow_seconds": 4}
    return {"steps": 10_000, "compare_requests": 7, "view_calls": 7, "follow_start": 2_000, "follow_seconds": 30}


def _document(runs, steps: int, k: int) -> dict:
    return runs.state([runs.entry(s, kl=0.01 * (1 + k / 4) + 1e-6 * s) for s in range(1, steps + 1)])


def _write_run(folder: Path, document: dict, config: dict) -> None:
    from app.runs.examples import RUN_DIR

    record = json.loads((RUN_DIR / "records" / "step-30.grpo-step.json").read_text())
    record["framework_config"] |= config
    (folder / "step-records").mkdir(parents=True)
    (folder / "step-records" / "step-30.grpo-step.json").write_text(json.dumps(record))
    (folder / "trainer_state.json").write_text(json.dumps(document))


def _timed(port: int, path: str) -> tuple[int, float, int]:
    t0 = time.perf_counter()
    status, _h, body = get(port, path, {"Accept-Encoding": ACCEPT_ENCODING}, timeout=120)
    return status, (time.perf_counter() - t0) * 1e3, len(body)


def _view_model_ms(state_file: Path, calls: int) -> float:
    """explorer() of that run, warm: its log parsed and kept once, as the server's run store keeps it."""
    from app.runs.domain.run_store import RunStore
    from app.runs.views.run_view import RunQuery, explorer

    with tempfile.TemporaryDirectory() as root:
        store = RunStore(Path(root))
        ident, _ = store.add(state_file.read_bytes())
        run_log = store.get(ident)
        assert run_log is not None
        explorer(ident, run_log, RunQuery())  # the first call, as the page's first request
        took = []
        for _ in range(calls):
            t0 = time.perf_counter()
            explorer(ident, run_log, RunQuery())
            took.append((time.perf_counter() - t0) * 1e3)
    return median(took)


def _cpu_s(pid: int) -> float:
    """The process's user + system CPU time so far, every thread's, and that of any child it has waited for
    (/proc/<pid>/stat fields 14-17: utime, stime, cutime, cstime, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # after the name, which may hold spaces
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _replace(target: Path, document: dict, spare: Path) -> None:
    """The whole file written beside the folder, then renamed over the old one: the follower never sees half."""
    spare.write_text(json.dumps(document))
    os.replace(spare, target)


def _follow(python: str, work: Path, n: dict) -> dict:
    runs = _fixture("run_fixtures")
    folder = work / "followed"
    folder.mkdir()
    target, spare = folder / "trainer_state.json", work / "trainer_state.json.next"
    entries = [runs.entry(s) for s in range(1, n["follow_start"] + 1)]
    _replace(target, runs.state(entries, close=False), spare)
    data = work / "follow-store"
    env = {**os.environ, "DATA_DIR": str(data)}
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen([python, "-m", "app", "open", str(folder), "--follow", "--interval", "1"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []
    first_update = threading.Event()

    def read() -> None:  # its lines, timed; the first update starts the window
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic(), line.rstrip()))
            if line.startswith("update "):
                first_update.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not first_update.wait(120):
            raise RuntimeError(f"the follower said no update in 120 s: {[t for _, t in lines][-10:]}")
        t0, cpu0 = time.monotonic(), _cpu_s(proc.pid)
        for i in range(1, n["follow_seconds"] + 1):  # one logged step a second, the whole file each time
            time.sleep(max(0.0, t0 + i - time.monotonic()))
            entries.append(runs.entry(n["follow_start"] + i))
            _replace(target, runs.state(entries, close=False), spare)
        time.sleep(max(0.0, t0 + n["follow_seconds"] + 1 - time.monotonic()))  # the last write's own second
        t1, cpu1 = time.monotonic(), _cpu_s(proc.pid)
        last = n["follow_start"] + n["follow_seconds"]
        state_file = next((data / "runs" / "follow").glob("*.json"), None)
        stored, caught_up = None, None
        while time.monotonic() < t1 + CATCH_UP_S:
            state = json.loads(state_file.read_text()) if state_file is not None and state_file.exists() else {}
            stored = state.get("last_step")
            if stored == last:
                caught_up = time.monotonic() - (t0 + n["follow_seconds"])
                break
            time.sleep(0.2)
            state_file = state_file or next((data / "runs" / "follow").glob("*.json"), None)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the follower says it ended and exits 0
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)
    updates = [t for at, t in lines if t.startswith("update ") and t0 <= at <= t1]
    return {"start_steps": n["follow_start"], "seconds": t1 - t0, "cpu_s": cpu1 - cpu0,
            "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0), "written_steps": n["follow_seconds"], "last_written": last,
            "last_stored": stored, "caught_up_s": caught_up, "updates_in_window": len(updates),
            "exit": proc.returncode, "output": [t for _, t in lines][-12:]}


def compare_follow_phase(args, figures: dict, details: dict, log_path: Path) -> None:
    n = sizes(args.smoke)
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        runs = _fixture("run_fixtures")
        folders = []
        for k, config in enumerate(CONFIGS):
            folders.append(work / f"run-{k}")
            _write_run(folders[-1], _document(runs, n["steps"], k), config)
        view_ms = _view_model_ms(folders[0] / "trainer_state.json", n["view_calls"])
        env = {**os.environ, "DATA_DIR": str(work / "store")}
        env.pop("DATABASE_URL", None)
        opened = [_open(args.python, folder, env) for folder in folders]
        bad = [o["output"] for o in opened if o["status"] != 0 or o["path"] is None]
        if bad:
            raise RuntimeError(f"python -m app open failed: {bad[0]}")
        ids = [o["path"].rsplit("/", 1)[-1] for o in opened]
        path = "/runs/compare?" + "&".join(f"run={i}" for i in ids)
        with server(args.python, args.device, args.log_level, log_path, env={"DATA_DIR": str(work / "store")}) as \
                (port, _proc):
            cold = _timed(port, path)
            warm = [_timed(port, path) for _ in range(n["compare_requests"])]
        log(f"compare_follow: {len(ids)} runs of {n['steps']} steps; compare cold {cold[1]:.0f} ms, warm "
            f"{median([w[1] for w in warm]):.0f} ms, {cold[2]} B; view model of one {view_ms:.0f} ms")
        follow = _follow(args.python, work, n)
        log(f"compare_follow: following {follow['seconds']:.0f} s from {follow['start_steps']} steps: "
            f"{follow['cpu_s']:.2f} s CPU = {follow['cpu_pct']:.1f} % of a core, {follow['updates_in_window']} "
            f"updates; last step stored {follow['last_stored']} of {follow['last_written']}")
        figures.update(
            compare_runs=len(ids), compare_logged_steps=n["steps"], compare_cold_ms=cold[1],
            compare_warm_ms=median([w[1] for w in warm]), compare_gzip_bytes=cold[2], explorer_view_model_ms=view_ms,
            follow_start_steps=follow["start_steps"], follow_seconds=follow["seconds"],
            follow_cpu_s=follow["cpu_s"], follow_cpu_pct=follow["cpu_pct"],
            follow_steps_written=follow["written_steps"], follow_updates=follow["updates_in_window"],
            follow_caught_up_s=follow["caught_up_s"] if follow["caught_up_s"] is not None else float("nan"))
        details["compare_follow"] = {"sizes": n, "configs": list(CONFIGS), "ids": ids, "path": path,
                                     "compare": {"cold": cold, "warm": warm,
                                                 "warm_spread_ms": statistics.pstdev([w[1] for w in warm])},
                                     "follow": follow}
        problems = []
        if {cold[0], *(w[0] for w in warm)} != {200}:
            problems.append(f"compare answers {[cold[0], *(w[0] for w in warm)]}")
        if follow["last_stored"] != follow["last_written"]:
            problems.append(f"the follower stored up to step {follow['last_stored']}, not {follow['last_written']}, "
                            f"{CATCH_UP_S:.0f} s after the last write: {follow['output']}")
        if follow["exit"] != 0:
            problems.append(f"the follower exited {follow['exit']} on Ctrl-C: {follow['output']}")
        if problems:
            details.setdefault("problems", []).append(f"compare_follow phase: {problems}")
            log(f"compare_follow: problems: {problems}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["compare_follow_phase", "sizes"]
