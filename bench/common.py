"""What every phase shares: the URLs measured, logging, one plain GET, and the app's process.

The app always runs as its own process (`python -m app`, one uvicorn worker, loopback)
so that what is measured is what a user's browser meets, not an in-process test client.
"""
from __future__ import annotations

import http.client
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HOST = "127.0.0.1"
WALKTHROUGH = "toy_grpo"
STEP = "clip"
TENSORS = f"/api/walkthroughs/{WALKTHROUGH}/step?step={STEP}"
STEP_PAGE = f"/walkthroughs/{WALKTHROUGH}/steps/{STEP}"
ACCEPT_ENCODING = "gzip, br"  # what a browser offers; every wrk run sends it
# Sizes the engine is scaled over: group size G, and the multiplier of a path's iterations.
GROUP_SIZES = (8, 64, 512, 4096)
SCALES = (1, 2, 4, 8)


def log(msg: str) -> None:
    # stderr, so stdout carries only the table (and the summary line under it).
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def get(port: int, path: str, headers: dict | None = None, timeout: float = 30,
        method: str = "GET") -> tuple[int, dict, bytes]:
    """One GET (or `method`); the body exactly as transferred (http.client does not decode gzip/br)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def machine_facts(device: str) -> dict:
    """What the figures depend on besides the code: stored next to them in the JSON."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # torch is imported here, not at the top: loading bench/run.py for its pure
    # functions (tests/test_bench_smoke.py does) should not cost a torch import.
    import torch

    facts = {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "platform": platform.platform(),
        "load_avg_start": list(os.getloadavg()),
    }
    if device == "cuda" and torch.cuda.is_available():
        facts["gpu"] = torch.cuda.get_device_name(0)
    try:
        version = subprocess.run(["wrk", "--version"], check=False, capture_output=True, text=True)
        facts["wrk"] = version.stdout.split("\n")[0].strip()
    except OSError:
        facts["wrk"] = None
    return facts


# ---------------------------------------------------------------- the app's process

def app_command(python: str, port: int, device: str, log_level: str) -> list[str]:
    """The one way the bench starts the app: the start-up phase times exactly this command."""
    return [python, "-m", "app", "--host", HOST, "--port", str(port), "--device", device,
            "--workers", "1", "--log-level", log_level]


@contextmanager
def server(python: str, device: str, log_level: str, log_path: Path, env: dict | None = None, cwd: Path = ROOT):
    """The app on a free port, healthy, for the phases that talk HTTP; stopped on the way out.
    `env`: variables set for this process only (the record phase gives it a DATA_DIR of its own); a value
    None removes the variable (the smollm phase's real run drops SMOLLM_GGUF). `cwd`: the checkout whose
    app is started (bench/capture.py's `--repo`; set PYTHONPATH to it in `env` too)."""
    port = free_port()
    merged = {k: v for k, v in {**os.environ, **env}.items() if v is not None} if env else None
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(app_command(python, port, device, log_level), cwd=cwd, env=merged,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(proc, port, 90)
        yield port, proc
    finally:
        stop(proc)


def wait_healthy(proc: subprocess.Popen, port: int, timeout: float, path: str = "/healthz") -> None:
    """Until `path` answers 200 (/readyz: until the app's warm-up is done)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with {proc.returncode} during start-up (see the bench log)")
        try:
            if get(port, path, timeout=2)[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no 200 from {path} within {timeout} s")
        time.sleep(0.005)  # short: the start-up figure is read off this loop


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
