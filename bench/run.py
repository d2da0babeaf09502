#!/usr/bin/env python3
"""`make bench`: the app's performance figures, side by side, from one run.

Starts the app (`python -m app`, one uvicorn worker, loopback, `--device` from
--device / BENCH_DEVICE), drives it with Debian's `wrk`, measures the engine in
this process, the first load and a step change in headless Chromium, start-up in
fresh processes, and how the engine scales. Prints ONE table (figure, value,
target, ratio, met?) and writes a JSON file (default bench/results.json).

Ratio = value / limit, so a "<=" target is met at ratio <= 1 and a ">=" target at
ratio >= 1. Targets whose limit is itself measured (e.g. 0.8 x /healthz) use the
figure measured in the same run. Nothing here asserts a timing: a missed target
is reported, not raised.

    python bench/run.py                # full run (~2.5-3 min), writes bench/results.json
    python bench/run.py --smoke        # ~1 s per measurement: checks the machinery only
    python bench/run.py --device cuda  # same script on a GPU machine
    python bench/run.py --skip paths   # all but the tiny LM's three training paths (~50 s of them)
    python bench/run.py --phases token_step,paths,tiny_lm_page --merge
                                       # only those phases; the other figures kept from --out

Phases, in the order they run: startup, engine, http, page_weight, browser (the toy), then the
tiny LM's token_step, paths and tiny_lm_page (issue 13), and overload (issue 21: 64 clients of
G = 4096 tensors while /healthz and a viewed page are timed), then record (issue 23: a G 16 x
4,096-token step record uploaded and its five step pages opened, against an app of its own over a
temporary DATA_DIR), then run (issue 34: a run directory of 10,000 logged steps, 20 recorded G 16 x 4,096
steps and ~1 GB of prime-rl token exports, opened cold and warm by `python -m app open`, peak RSS, the token
reader alone, the explorer's first view, weight and JSON, and since issue 50 its HTML alone, warm: target <= 150 ms),
then compare_follow (issue 50: four 10,000-step runs whose configs differ a little compared by
GET /runs/compare, warm target <= 400 ms; explorer()'s time alone; and `python -m app open RUN_DIR --follow` while a
writer adds one logged step a second, its CPU time over the window as a share of one core, target <= 5 %), then
smollm (issue 33: the real model's checkpoint load and one live step, each in a fresh process, its six finished step
pages against an app of its own, and its graph's layout).
http needs engine (it takes step samples next to its wrk runs), so selecting
http selects engine.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# `bench` and `app` importable when run as bench/run.py: Python puts bench/ itself on
# sys.path, not the repository root. (A plain sys.path call, so the imports below
# still count as being at the top of the file.)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# FIGURES, TARGETS, evaluate and parse_wrk are re-exported: tests/test_bench_smoke.py
# loads this file by its path and uses them from here.
from bench.common import ACCEPT_ENCODING, ROOT, log, machine_facts, server
from bench.phases.browser import browser_phase
from bench.phases.compare_follow import compare_follow_phase
from bench.phases.engine import engine_phase
from bench.phases.first_minute import first_minute_phase
from bench.phases.http import http_phase
from bench.phases.jobs import jobs_phase
from bench.phases.overload import overload_phase
from bench.phases.page_weight import page_weight
from bench.phases.record import record_phase
from bench.phases.run import run_phase
from bench.phases.smollm import smollm_phase
from bench.phases.startup import startup_phase
from bench.phases.tiny_lm import paths_phase, token_step_phase
from bench.phases.tiny_lm_page import tiny_lm_page_weight
from bench.report import (
    FIGURES,
    FIRST_LOAD_LIMIT_BYTES,
    TARGETS,
    evaluate,
    markdown_table,
    table_rows,
)
from bench.wrk import parse_wrk

__all__ = ["FIGURES", "PHASES", "TARGETS", "evaluate", "main", "parse_args", "parse_wrk", "select_phases"]

PHASES = ("startup", "engine", "http", "page_weight", "browser", "token_step", "paths", "tiny_lm_page", "jobs",
          "overload", "record", "run", "compare_follow", "smollm", "first_minute")
# run against one app process
HTTP_PHASES = frozenset({"http", "page_weight", "browser", "tiny_lm_page", "jobs", "overload"})


def select_phases(phases: str | None, skip: str | None) -> tuple[str, ...]:
    """--phases / --skip (comma-separated names of PHASES) -> the phases to run, in PHASES order."""
    def names(text):
        got = {n.strip() for n in (text or "").split(",") if n.strip()}
        unknown = got - set(PHASES)
        if unknown:
            raise ValueError(f"unknown phase(s) {sorted(unknown)}: choose from {', '.join(PHASES)}")
        return got
    chosen = names(phases) if phases and phases != "all" else set(PHASES)
    chosen -= names(skip)
    if "http" in chosen:
        chosen.add("engine")  # the http phase takes engine step samples right next to its wrk runs
    return tuple(p for p in PHASES if p in chosen)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=os.environ.get("BENCH_DEVICE", "cpu"),
                   help="passed to `python -m app --device` and used for the engine (env BENCH_DEVICE, default cpu)")
    p.add_argument("--smoke", action="store_true", help="~1 s per measurement, single repeats: checks the machinery")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    p.add_argument("--python", default=sys.executable, help="interpreter that runs the app (default: this one)")
    p.add_argument("--chromium", default=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
    p.add_argument("--duration", type=float, help="seconds per wrk run (default 5, smoke 1)")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-level", default="warning", help="the app's log level (warning: no access log)")
    p.add_argument("--process", help="training path for the iteration scaling (default r1, smoke r1-zero)")
    p.add_argument("--phases", default=os.environ.get("BENCH_PHASES", "all"),
                   help=f"comma-separated phases to run (env BENCH_PHASES, default all): {', '.join(PHASES)}")
    p.add_argument("--skip", default=os.environ.get("BENCH_SKIP", ""),
                   help="comma-separated phases not to run (env BENCH_SKIP), e.g. paths")
    p.add_argument("--merge", action="store_true",
                   help="keep the figures and details of the phases not run from the existing --out file")
    p.add_argument("--paths-scale", type=float,
                   help="run_path's scale for the paths phase (default 1.0: the walkthrough's paths; smoke 0.02)")
    args = p.parse_args(argv)
    try:
        args.selected = select_phases(args.phases, args.skip)
    except ValueError as exc:
        p.error(str(exc))
    # Repeat counts are not flags: --smoke picks the smallest that still exercise every path.
    smoke = args.smoke
    args.duration = args.duration or (1.0 if smoke else 5.0)
    args.process = args.process or ("r1-zero" if smoke else "r1")
    args.warmup_requests = 3 if smoke else 20
    args.starts = 1 if smoke else 5
    args.engine_warmup = 5 if smoke else 30
    args.engine_runs = 30 if smoke else 450  # a third alone, a third right before, a third right after wrk
    args.scaling_runs = 1 if smoke else 5
    args.process_runs = 1 if smoke else 3
    args.page_loads = 2 if smoke else 10
    args.step_changes = 2 if smoke else 10
    args.paths_scale = args.paths_scale or (0.02 if smoke else 1.0)
    args.token_seeds = 2 if smoke else 8  # tiny-LM token step: seeds, each timed token_repeats times
    args.token_repeats = 1 if smoke else 3
    args.jobs_scale = 0.02 if smoke else 0.25  # the jobs phase's tiny-LM path (issue 21)
    args.overload_seconds = 3.0 if smoke else 10.0  # 64 clients of G = 4096 tensors (issue 21)
    args.record_loads = 1 if smoke else 5  # warm loads of each step record page (issue 23)
    args.explorer_requests = 2 if smoke else 7  # warm GETs of the run explorer's HTML (issue 50)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    selected = args.selected
    if "http" in selected and shutil.which("wrk") is None:
        print("error: wrk not found (make bench installs it: apt-get install wrk)", file=sys.stderr)
        return 2
    if {"browser", "record"} & set(selected) and not Path(args.chromium).exists():
        print(f"error: Chromium not found at {args.chromium} (set CHROMIUM_PATH or run `make chromium`)",
              file=sys.stderr)
        return 2
    # Imported here: loading this file for its pure functions must not need torch or the app.
    from app.engine.runtime.device import DeviceUnavailable, resolve_device

    try:
        resolved = resolve_device(args.device)  # the app would refuse to start: say so before anything runs
    except DeviceUnavailable as exc:
        print(f"error: --device {args.device}: {exc}", file=sys.stderr)
        return 2
    args.resolved_device = resolved
    previous = None
    if args.merge:
        if not args.out.exists():
            print(f"error: --merge: {args.out} does not exist", file=sys.stderr)
            return 2
        previous = json.loads(args.out.read_text())
    began = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(tempfile.gettempdir()) / f"bench-server-{os.getpid()}.log"  # the app's own output
    log_path.write_bytes(b"")
    log(f"app output: {log_path}")
    figures: dict = {}
    details: dict = {}
    machine = machine_facts(resolved)
    machine["device_flag"] = args.device
    log(f"{machine['cpu_model']}, {machine['cores']} cores, torch {machine['torch']}, device {args.device}, "
        f"load {machine['load_avg_start'][0]:.2f}; phases {', '.join(selected)}")

    # Start-up and the engines first, while no app process is running next to them;
    # then every phase that talks HTTP, against one app.
    if "startup" in selected:
        startup_phase(args, figures, details, log_path)
    if "engine" in selected:
        engine_phase(args, figures, details)
    if "token_step" in selected:
        token_step_phase(args, figures, details)
    if "paths" in selected:
        paths_phase(args, figures, details)
    if HTTP_PHASES & set(selected):
        with server(args.python, args.device, args.log_level, log_path) as (port, _proc):
            if "http" in selected:
                http_phase(port, args, figures, details)
            if "page_weight" in selected:
                page_weight(port, figures, details)
            if "browser" in selected:
                browser_phase(port, args, figures, details)
            if "tiny_lm_page" in selected:
                tiny_lm_page_weight(port, figures, details)
            if "jobs" in selected:
                jobs_phase(port, args, figures, details)
            if "overload" in selected:  # last: its thousands of answers crowd the response cache
                overload_phase(port, args, figures, details)
    if "record" in selected:  # its own app (a temporary DATA_DIR), after the shared one has stopped
        record_phase(args, figures, details, log_path)
    if "run" in selected:  # a whole run's directory (~1 GB), opened by fresh processes, its explorer in its own app
        run_phase(args, figures, details, log_path)
    if "compare_follow" in selected:  # four 10,000-step runs compared, and a run followed as it grows (issue 50)
        compare_follow_phase(args, figures, details, log_path)
    if "smollm" in selected:  # fresh processes and an app of its own (the real model: GBs, minutes)
        smollm_phase(args, figures, details, log_path)
    if "first_minute" in selected:  # two fresh servers, as `make run` starts them (issue 47): minutes
        first_minute_phase(args, figures, details, log_path)
    if "http" in selected:
        figures["web_overhead_ms"] = figures["tensors_uncached_c1_p50_ms"] - figures["engine_step_ms"]
    if "engine" in selected:
        # The engine phase's raw step samples: only their count and spread go in the JSON.
        walls = details.pop("_step_walls")
        details.pop("_step_cpus")
        details["engine_step_runs"] = len(walls)
        details["engine_step_ms_p10_p90"] = [statistics.quantiles(walls, n=10)[i] * 1e3 for i in (0, 8)] \
            if len(walls) >= 10 else None

    machine["load_avg_end"] = list(os.getloadavg())
    merged = None
    if previous is not None:  # this run's figures and details win; the rest are the earlier run's
        figures = {**previous.get("figures", {}), **figures}
        details = {**previous.get("details", {}), **details}
        merged = {"generated": previous.get("generated"), "mode": previous.get("mode"),
                  "seconds": previous.get("seconds"), "machine": previous.get("machine"),
                  "phases": previous.get("phases", list(PHASES[:5])),  # files from before --phases ran all five
                  "settings": previous.get("settings"), "merged": previous.get("merged")}
    targets = evaluate(figures)
    rows = table_rows(figures, targets, args.process)
    table = markdown_table(rows)
    # Only a run of every phase (or a merge into a file that has the rest) must carry every figure.
    missing = [k for k in FIGURES if k not in figures] if (merged or set(selected) == set(PHASES)) else []
    results = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "mode": "smoke" if args.smoke else "full",
        "seconds": round(time.perf_counter() - began, 1),
        "phases": list(selected),
        "machine": machine,
        "settings": {"wrk": f"-t{args.threads} -c{args.connections} -d{args.duration:g}s --latency",
                     "accept_encoding": ACCEPT_ENCODING, "app_log_level": args.log_level,
                     "engine_runs": args.engine_runs, "starts": args.starts, "process": args.process,
                     "page_loads": args.page_loads, "step_changes": args.step_changes,
                     "scaling_time": "process CPU time (time.process_time), median",
                     "paths_scale": args.paths_scale, "token_seeds": args.token_seeds,
                     "token_repeats": args.token_repeats, "record_loads": args.record_loads,
                     "explorer_requests": args.explorer_requests,
                     "first_load_limit_bytes": FIRST_LOAD_LIMIT_BYTES},
        "figures": figures,
        "targets": targets,
        "details": details,
        "missing_figures": missing,
        "table_markdown": table,
    }
    if merged is not None:
        results["merged_from"] = merged  # the run that measured the phases not in "phases"
    args.out.write_text(json.dumps(results, indent=2, default=float, allow_nan=True) + "\n")
    print(table, end="")
    met = sum(t["met"] for t in targets)
    print(f"\n{met}/{len(targets)} targets met · {machine['cpu_model']}, {machine['cores']} cores, "
          f"torch {machine['torch']}, device {args.device} · load avg {machine['load_avg_start'][0]:.2f} → "
          f"{machine['load_avg_end'][0]:.2f} · {results['seconds']:.0f} s · {args.out}")
    if details.get("http_errors"):
        print(f"warning: non-2xx or socket errors during wrk runs: {details['http_errors']}")
    if missing:
        print(f"error: figures missing: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
