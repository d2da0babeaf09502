"""The first minute (issue 47): a newcomer runs `make run` and opens the browser.

Twice in the same run, each time a fresh `python -m app` (as `make run` starts it: warm-up on, the job
runner child, compute workers) over a fresh temporary DATA_DIR: once with DEFAULT_RUNS on (the server
computes its default runs meanwhile), once with DEFAULT_RUNS=false. For each:

- the seconds from the process's start to the first 200 of /healthz and of /readyz;
- from the moment /readyz answers 200, the first request of each first page, in a newcomer's order: the
  toy's step 1, the tiny LM's step 1, the real model's step 1, the upload page, the run explorer's example
  (its POST, which stores the shipped run, and the explorer's GET it redirects to, timed together);
- then the same pages warm (median of 5);
- eight toy tensors answers with seeds never asked before (computed, no training): median and max;
- the real model's default step: with DEFAULT_RUNS on, the server's own run (queued behind the toy's and
  the tiny LM's first runs); off, started alone by the page's Run button; its `seconds` as the job row
  keeps them (the runner's own time for it), polled through the API.

Every request sends a browser's Accept-Encoding and is timed from send to the body's last byte.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ACCEPT_ENCODING, get, log, server, wait_healthy

FIRST_PAGES = {  # name -> URL, in a newcomer's order
    "toy": "/walkthroughs/toy_grpo/steps/policy",
    "tiny_lm": "/walkthroughs/tiny_lm_grpo/steps/sample",
    "smollm": "/walkthroughs/smollm_grpo/steps/sample",
    "upload": "/walkthroughs/new",
}
RUN_EXAMPLE = "/runs/examples/trl"
SMOL_STEP_API = "/api/walkthroughs/smollm_grpo/step"
READY_TIMEOUT_S = 300.0
SMOL_TIMEOUT_S = 900.0
RESOLUTION_MS = 5.0  # the ratios' floor: below this a difference is the loopback's jitter, not the server's
HEADERS = {"Accept-Encoding": ACCEPT_ENCODING, "Accept": "text/html"}


def _timed(port: int, path: str, method: str = "GET") -> tuple[float, int, dict]:
    began = time.perf_counter()
    status, headers, _ = get(port, path, HEADERS, timeout=120, method=method)
    return (time.perf_counter() - began) * 1e3, status, headers


def _run_example(port: int) -> tuple[float, int]:
    """POST the example (303 to its explorer), then GET the explorer: (ms for both, final status)."""
    began = time.perf_counter()
    status, headers, _ = get(port, RUN_EXAMPLE, HEADERS, timeout=120, method="POST")
    if status != 303:
        return (time.perf_counter() - began) * 1e3, status
    status, _, _ = get(port, headers["location"], HEADERS, timeout=120)
    return (time.perf_counter() - began) * 1e3, status


def _smol_step_seconds(port: int, start: bool) -> float:
    """The default step's own time (its job row's seconds), waited for; started first when `start`."""
    if start:
        status, _, _ = get(port, FIRST_PAGES["smollm"], HEADERS, method="POST")
        if status != 303:
            raise RuntimeError(f"POST {FIRST_PAGES['smollm']}: {status}")
    import json

    deadline = time.monotonic() + SMOL_TIMEOUT_S
    while time.monotonic() < deadline:
        status, _, body = get(port, SMOL_STEP_API, {"Accept-Encoding": "identity"}, timeout=60)
        if status == 200:
            payload = json.loads(body)
            if payload["state"] != "done":
                raise RuntimeError(f"the default step {payload['state']}: {payload.get('error')}")
            return float(payload["run"]["seconds"])
        if status not in (202, 404):  # 404: not queued yet (start-up)
            raise RuntimeError(f"GET {SMOL_STEP_API}: {status}")
        time.sleep(1.0)
    raise RuntimeError(f"the default step not done within {SMOL_TIMEOUT_S:.0f} s")


def _one_server(args, default_runs: bool, log_path: Path) -> dict:
    mode = "on" if default_runs else "off"
    with tempfile.TemporaryDirectory(prefix=f"bench-first-{mode}-") as data:
        # `make run`'s defaults, not a test's: those four removed from the app's environment
        env = {"DATA_DIR": data, "DEFAULT_RUNS": "true" if default_runs else "false", "WARM_UP": None,
               "COMPUTE_PROCESSES": None, "JOB_RUNNER": None}
        began = time.perf_counter()
        with server(args.python, args.device, args.log_level, log_path, env) as (port, proc):
            healthz_s = time.perf_counter() - began
            wait_healthy(proc, port, READY_TIMEOUT_S, "/readyz")
            ready_s = time.perf_counter() - began
            log(f"first minute, default runs {mode}: /healthz at {healthz_s:.1f} s, /readyz at {ready_s:.1f} s")
            first, statuses = {}, {}
            for name, url in FIRST_PAGES.items():
                first[name], statuses[name], _ = _timed(port, url)
            first["run_example"], statuses["run_example"] = _run_example(port)
            warm = {}
            for name, url in FIRST_PAGES.items():
                warm[name] = statistics.median(_timed(port, url)[0] for _ in range(5))
            warm["run_example"] = statistics.median(_run_example(port)[0] for _ in range(5))
            uncached = [_timed(port, f"/api/walkthroughs/toy_grpo/step?step=clip&seed={1000 + i}")[0]
                        for i in range(8)]
            said = ", ".join(f"{k} {v:.0f}" for k, v in first.items())
            log(f"first minute, default runs {mode}: first pages {said} ms")
            smol_s = _smol_step_seconds(port, start=not default_runs)
            log(f"first minute, default runs {mode}: the real model's default step {smol_s:.1f} s")
            return {"healthz_s": healthz_s, "ready_s": ready_s, "first_ms": first, "warm_ms": warm,
                    "statuses": statuses, "uncached_tensors_ms": uncached, "smol_step_s": smol_s}


def first_minute_phase(args, figures: dict, details: dict, log_path: Path) -> None:
    on = _one_server(args, True, log_path)
    off = _one_server(args, False, log_path)
    for mode, got in (("on", on), ("off", off)):
        figures[f"first_healthz_{mode}_s"] = got["healthz_s"]
        figures[f"first_ready_{mode}_s"] = got["ready_s"]
        for name in (*FIRST_PAGES, "run_example"):
            figures[f"first_{name}_{mode}_ms"] = got["first_ms"][name]
            figures[f"first_{name}_warm_{mode}_ms"] = got["warm_ms"][name]
        figures[f"first_uncached_tensors_{mode}_median_ms"] = statistics.median(got["uncached_tensors_ms"])
        figures[f"first_uncached_tensors_{mode}_max_ms"] = max(got["uncached_tensors_ms"])
        figures[f"first_smol_step_{mode}_s"] = got["smol_step_s"]
    names = (*FIRST_PAGES, "run_example")
    figures["first_page_max_on_ms"] = max(on["first_ms"][n] for n in names)
    # Against its time with DEFAULT_RUNS=false, both floored at RESOLUTION_MS: a replayed page takes 1-3 ms,
    # and a loopback request's jitter alone would make 2 ms against 1 ms a "2x" (the raw ratios in details).
    ratios = {n: max(on["first_ms"][n], RESOLUTION_MS) / max(off["first_ms"][n], RESOLUTION_MS) for n in names}
    figures["first_page_ratio_max"] = max(ratios.values())
    figures["first_smol_step_ratio"] = on["smol_step_s"] / off["smol_step_s"]
    raw = {n: on["first_ms"][n] / off["first_ms"][n] for n in names}
    details["first_minute"] = {"on": on, "off": off, "pages": {**FIRST_PAGES, "run_example": RUN_EXAMPLE},
                               "ratios": ratios, "raw_ratios": raw, "resolution_ms": RESOLUTION_MS}
