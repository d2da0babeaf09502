"""The real server as a subprocess on loopback (`python -m app`), for load, memory, worker,
fault and container tests: started on a free port, healthy before use, always stopped."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from paths import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_healthy(proc: subprocess.Popen, port: int, log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"no /healthz within {timeout} s:\n{log_path.read_text()[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM our server (uvicorn stops its own workers), then SIGKILL what we started if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: only what this test started
            proc.wait(timeout=5)


def _die_with_parent() -> None:
    # Runs in the child before exec: if the test process is killed, the server goes too.
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@contextlib.contextmanager
def running_server(tmp_path: Path, *args: str, env: dict | None = None, timeout: float = 90):
    """`python -m app --port <free> --host 127.0.0.1 *args`, healthy on exit from __enter__."""
    port = free_port()
    log_path = tmp_path / f"server-{port}.log"
    full_env = {**os.environ, "UPLOADS_DIR": str(tmp_path / "uploads"), "PYTHONUNBUFFERED": "1", **(env or {})}
    if "COMPUTE_PROCESSES" not in (env or {}):
        full_env.pop("COMPUTE_PROCESSES", None)  # conftest's 0 is for in-process apps: the server's own default
    if "JOB_RUNNER" not in (env or {}):
        full_env.pop("JOB_RUNNER", None)  # conftest's thread is for in-process apps, likewise
    if "WALKTHROUGHS_DIR" not in (env or {}):
        full_env.pop("WALKTHROUGHS_DIR", None)  # the default folder: the embedded walkthrough
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port), *args],
                                cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent)
    try:
        wait_healthy(proc, port, log_path, timeout)
        yield Server(proc, port, log_path)
    finally:
        stop(proc)
