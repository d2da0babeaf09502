"""Driving Debian's `wrk` and reading its text output.

wrk rather than a Python load generator: a Python client on the same two cores would
be the bottleneck long before one uvicorn worker is, and would measure itself.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

from bench.common import ACCEPT_ENCODING, HOST

# wrk prints latencies with a unit per value ("812.00us", "3.58ms", "1.20s"); all become ms.
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def parse_wrk(text: str) -> dict:
    """The figures of one `wrk --latency` run; NaN or 0 where wrk printed nothing."""
    def latency(pct: str) -> float:
        m = re.search(rf"^\s*{pct}%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.MULTILINE)
        return float(m.group(1)) * _UNITS[m.group(2)] if m else float("nan")

    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+),", text)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    return {
        "rps": float(rps.group(1)) if rps else float("nan"),
        "p50_ms": latency("50"), "p75_ms": latency("75"), "p90_ms": latency("90"), "p99_ms": latency("99"),
        "requests": int(total.group(1)) if total else 0,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": sum(map(int, sock.groups())) if sock else 0,
    }


def wrk(port: int, path: str, *, duration: float, connections: int, threads: int,
        headers: dict | None = None, lua: Path | None = None, lua_args: tuple = ()) -> dict:
    """One wrk run against the app; raises if wrk fails or its output cannot be read,
    so a broken run never turns into a figure."""
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--latency", "--timeout", "10s",
           "-H", f"Accept-Encoding: {ACCEPT_ENCODING}"]
    for k, v in (headers or {}).items():
        cmd += ["-H", f"{k}: {v}"]
    if lua is not None:
        cmd += ["-s", str(lua)]
    cmd.append(f"http://{HOST}:{port}{path}")
    if lua_args:
        cmd += ["--", *map(str, lua_args)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=duration + 60)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    result = parse_wrk(out.stdout)
    result["command"] = " ".join(cmd)
    result["load_avg_1min_after"] = os.getloadavg()[0]  # other work on the machine skews a run
    if result["requests"] == 0 or math.isnan(result["rps"]):
        raise RuntimeError(f"could not read wrk's output:\n{out.stdout}")
    return result
