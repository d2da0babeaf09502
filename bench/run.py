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

    python bench/run.py                # full run (< 3 min), writes bench/results.json
    python bench/run.py --smoke        # ~1 s per measurement: checks the machinery only
    python bench/run.py --device cuda  # same script on a GPU machine
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
from bench.phases.engine import engine_phase
from bench.phases.http import http_phase
from bench.phases.page_weight import page_weight
from bench.phases.startup import startup_phase
from bench.report import (
    FIGURES,
    FIRST_LOAD_LIMIT_BYTES,
    TARGETS,
    evaluate,
    markdown_table,
    table_rows,
)
from bench.wrk import parse_wrk

__all__ = ["FIGURES", "TARGETS", "evaluate", "main", "parse_args", "parse_wrk"]


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
    args = p.parse_args(argv)
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
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        print("error: wrk not found (make bench installs it: apt-get install wrk)", file=sys.stderr)
        return 2
    if not Path(args.chromium).exists():
        print(f"error: Chromium not found at {args.chromium} (set CHROMIUM_PATH or run `make chromium`)",
              file=sys.stderr)
        return 2
    # Imported here: loading this file for its pure functions must not need torch or the app.
    from app.engine.device import DeviceUnavailable, resolve_device

    try:
        resolved = resolve_device(args.device)  # the app would refuse to start: say so before anything runs
    except DeviceUnavailable as exc:
        print(f"error: --device {args.device}: {exc}", file=sys.stderr)
        return 2
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
        f"load {machine['load_avg_start'][0]:.2f}")

    # Start-up and the engine first, while no app process is running next to them;
    # then every phase that talks HTTP, against one app.
    startup_phase(args, figures, details, log_path)
    engine_phase(args, figures, details)
    with server(args.python, args.device, args.log_level, log_path) as (port, _proc):
        http_phase(port, args, figures, details)
        page_weight(port, figures, details)
        browser_phase(port, args, figures, details)
    figures["web_overhead_ms"] = figures["tensors_uncached_c1_p50_ms"] - figures["engine_step_ms"]
    # The engine phase's raw step samples: only their count and spread go in the JSON.
    walls = details.pop("_step_walls")
    details.pop("_step_cpus")
    details["engine_step_runs"] = len(walls)
    details["engine_step_ms_p10_p90"] = [statistics.quantiles(walls, n=10)[i] * 1e3 for i in (0, 8)] \
        if len(walls) >= 10 else None

    machine["load_avg_end"] = list(os.getloadavg())
    targets = evaluate(figures)
    rows = table_rows(figures, targets, args.process)
    table = markdown_table(rows)
    missing = [k for k in FIGURES if k not in figures]
    results = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "mode": "smoke" if args.smoke else "full",
        "seconds": round(time.perf_counter() - began, 1),
        "machine": machine,
        "settings": {"wrk": f"-t{args.threads} -c{args.connections} -d{args.duration:g}s --latency",
                     "accept_encoding": ACCEPT_ENCODING, "app_log_level": args.log_level,
                     "engine_runs": args.engine_runs, "starts": args.starts, "process": args.process,
                     "page_loads": args.page_loads, "step_changes": args.step_changes,
                     "scaling_time": "process CPU time (time.process_time), median",
                     "first_load_limit_bytes": FIRST_LOAD_LIMIT_BYTES},
        "figures": figures,
        "targets": targets,
        "details": details,
        "missing_figures": missing,
        "table_markdown": table,
    }
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
