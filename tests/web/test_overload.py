"""Overload: 64 clients of distinct expensive requests (G = 4096 tensors, a new seed each) on
the real server, for OVERLOAD_SECONDS (default 10), while one more client polls /healthz and
the walkthrough list and an already viewed step page (cheap: replayed) every 50 ms. The poller is its own process: in the load
generator's event loop it would time the generator decoding 64 megabyte-sized answers, not
the server (that doubled /healthz's p99 here).

Every answer to the 64 must be a 200 or a prompt 503 with Retry-After (the compute slots and
their waiting line are bounded; the rest is refused, never queued for long), and /healthz must
stay answerable: the compute runs in worker processes (app/web/compute_pool.py, the default
of `python -m app`), not on the request thread pool nor in the web process, whose GIL the
event loop needs (issue 21: /healthz p99 ~100 ms with threads, under 20 ms with processes;
`make bench`'s overload phase measures the same). The bounds asserted are generous (noisy 2-core machines); the measured figures
(p50/p99 of /healthz and of the list, the counts of 200 and 503) are printed, not asserted.
"""
from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import time

import httpx
import pytest
from live_server import running_server
from reporting import report
from run_async import run_async

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase

OVERLOAD_SECONDS = float(os.environ.get("OVERLOAD_SECONDS", "10"))
CLIENTS = 64
POLL_S = 0.05
EXPENSIVE = "/api/walkthroughs/toy_grpo/step?group_size=4096&seed={}"
CACHED_PAGE = "/walkthroughs/toy_grpo/steps/clip"   # a step page: rendered once, then replayed
HEALTH_P99_BOUND_S = 2.0  # the Docker HEALTHCHECK allows 4 s; this is a bound, not a target


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def overload(base_url: str, seconds: float) -> dict:
    seeds = itertools.count(500_000)
    statuses: dict[str, int] = {}
    wrong: list[str] = []
    latencies: dict[str, list[float]] = {"/healthz": [], "/api/walkthroughs": [], CACHED_PAGE: [], "expensive": []}
    # "A cached page": viewed once before the load, as a class's shared link would have been.
    # Its first view computes (a compute slot, so under overload it may wait or get a 503).
    assert httpx.get(base_url + CACHED_PAGE, timeout=60).status_code == 200
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
        async def expensive_client():
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                try:
                    response = await client.get(EXPENSIVE.format(next(seeds)))
                except httpx.HTTPError as exc:
                    wrong.append(f"{type(exc).__name__}: {exc!r}")
                    continue
                latencies["expensive"].append(time.perf_counter() - t0)
                key = str(response.status_code)
                if response.status_code == 503:
                    if response.headers.get("retry-after") != "1":
                        wrong.append(f"503 without Retry-After: {dict(response.headers)}")
                    key = "503+Retry-After"
                elif response.status_code != 200:
                    wrong.append(f"{response.status_code}: {response.text[:200]}")
                statuses[key] = statuses.get(key, 0) + 1

        results = multiprocessing.get_context("spawn").Queue()
        poller = multiprocessing.get_context("spawn").Process(
            target=probe, args=(base_url, deadline - time.monotonic(), results), daemon=True)
        poller.start()
        await asyncio.gather(*(expensive_client() for _ in range(CLIENTS)))
        probed = await asyncio.get_running_loop().run_in_executor(None, results.get, True, 60)
        poller.join(timeout=10)
    for path, values in probed["latencies"].items():
        latencies[path].extend(values)
    wrong.extend(probed["wrong"])
    return {"statuses": statuses, "wrong": wrong, "latencies": latencies}


def probe(base_url: str, seconds: float, results) -> None:
    """In a process of its own: poll the cheap routes while the 64 load the server."""
    latencies: dict[str, list[float]] = {"/healthz": [], "/api/walkthroughs": [], CACHED_PAGE: []}
    wrong: list[str] = []
    time.sleep(0.5)  # let the 64 fill the slots and the line first
    deadline = time.monotonic() + seconds - 0.5
    with httpx.Client(base_url=base_url, timeout=60) as client:
        while time.monotonic() < deadline:
            # Waking from its pause, this process waits for a core the server and the load
            # hold (2 cores): ~70 ms on whichever request comes first, whatever its route (seen
            # by swapping the order). An untimed request pays that; the timed ones are the
            # server's.
            client.get("/healthz")
            for path in latencies:
                t0 = time.perf_counter()
                response = client.get(path)
                latencies[path].append(time.perf_counter() - t0)
                if response.status_code != 200:
                    wrong.append(f"{path}: {response.status_code}")
            time.sleep(POLL_S)
    results.put({"latencies": latencies, "wrong": wrong})


def summary(result: dict, seconds: float) -> str:
    lat = result["latencies"]
    parts = [f"overload: {CLIENTS} clients of G=4096 tensors for {seconds:.0f} s: {result['statuses']}, "
             f"{len(result['wrong'])} wrong answers"]
    for name, values in lat.items():
        if values:
            parts.append(f"  {name:34} n={len(values):5}  p50 {percentile(values, 50) * 1000:7.1f} ms  "
                         f"p99 {percentile(values, 99) * 1000:7.1f} ms  max {max(values) * 1000:7.1f} ms")
    return "\n".join(parts)


def test_health_stays_fast_under_compute_overload(tmp_path, request):
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning") as server:
        result = run_async(overload(server.url, OVERLOAD_SECONDS))
        report(request, summary(result, OVERLOAD_SECONDS))
        assert not result["wrong"], result["wrong"][:5]
        assert set(result["statuses"]) <= {"200", "503+Retry-After"}, result["statuses"]
        assert result["statuses"].get("200", 0) >= 1, result["statuses"]
        health = result["latencies"]["/healthz"]
        assert len(health) >= 10 and percentile(health, 99) < HEALTH_P99_BOUND_S, summary(result, OVERLOAD_SECONDS)
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
        assert "Traceback" not in server.log(), server.log()[-3000:]
