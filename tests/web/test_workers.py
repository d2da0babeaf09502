
"""`python -m app --workers 2`: two worker processes, both answering, with identical bodies.

Which worker answers a request is invisible to the client, so the test reads each worker's
/proc/<pid>/io (bytes written, sockets included) to see that both served responses, and
checks that every identical request got an identical body.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from live_server import running_server

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase

REQUESTS = [
    "/api/walkthroughs/toy_grpo/step?step=clip&seed=77",
    "/api/walkthroughs/toy_grpo",
    "/walkthroughs/toy_grpo/steps/clip?node=ratio",
]


def children(pid: int) -> list[tuple[int, str]]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(entry.name), cmdline))
    return out


def bytes_written(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar")


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_workers_answer_identically(tmp_path):
    with running_server(tmp_path, "--workers", "2", "--device", "cpu", "--log-level", "info") as server:
        # the first /healthz came from whichever worker was ready first: wait for both
        wait_for(lambda: server.log().count("Application startup complete.") >= 2, 90, "both workers to start")
        workers = [(pid, cmd) for pid, cmd in children(server.proc.pid) if "multiprocessing.spawn" in cmd]
        assert len(workers) == 2, children(server.proc.pid)
        before = {pid: bytes_written(pid) for pid, _ in workers}

        bodies: dict[str, set[str]] = {path: set() for path in REQUESTS}
        sent = 0
        while sent < 50 or (sent < 400 and min(bytes_written(p) - before[p] for p in before) < 4096):
            path = REQUESTS[sent % len(REQUESTS)]
            # a new connection each time, so the kernel hands each one to either worker
            response = httpx.get(server.url + path, timeout=30, headers={"Connection": "close"})
            assert response.status_code == 200, (path, response.status_code, response.text[:200])
            body = (json.dumps(response.json(), sort_keys=True)
                    if response.headers["content-type"].startswith("application/json") else response.text)
            bodies[path].add(body)
            sent += 1
        served = {pid: bytes_written(pid) - before[pid] for pid in before}
        assert all(n >= 4096 for n in served.values()), f"bytes written per worker after {sent} requests: {served}"
        differing = [path for path, seen in bodies.items() if len(seen) != 1]
        assert not differing, f"identical requests got different bodies: {differing}"
