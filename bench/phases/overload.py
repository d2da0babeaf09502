"""Overload (issue 21): 64 clients of distinct expensive requests while cheap ones are timed.

The 64 ask `/api/walkthroughs/toy_grpo/step?group_size=4096&seed=N`, N new for every request
(so every request misses every cache: ~1 MB of JSON each), from this process's event loop, for
`args.overload_seconds`. A separate poller process (spawned: in this process's loop it would
time our own decoding of 64 megabyte answers, not the server) times `/healthz` and an already
viewed step page (STEP_PAGE, viewed once before the load, so it is replayed) every 50 ms.
Targets: /healthz p99 ≤ 20 ms, the viewed page p99 ≤ 50 ms (bench/report.py). The 64 must get
200s or prompt 503s with Retry-After (the compute slots and their line are bounded).
Same method as tests/web/test_overload.py, which asserts the answers and prints the figures.
"""
from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import statistics
import time

from bench.common import HOST, STEP_PAGE, log

CLIENTS = 64
EXPENSIVE = "/api/walkthroughs/toy_grpo/step?group_size=4096&seed={}"
POLL_S = 0.05
PROBED = ("/healthz", STEP_PAGE)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def probe(base_url: str, seconds: float, results) -> None:
    """In its own process: time the cheap routes while the 64 load the server."""
    import httpx

    latencies: dict[str, list[float]] = {p: [] for p in PROBED}
    wrong: list[str] = []
    time.sleep(0.5)  # let the 64 fill the slots and the line first
    deadline = time.monotonic() + seconds - 0.5
    with httpx.Client(base_url=base_url, timeout=60) as client:
        while time.monotonic() < deadline:
            # Waking from its pause, this process first waits for a core the server and the load
            # hold (~70 ms on a 2-core machine, whatever the route): an untimed request pays it.
            client.get("/healthz")
            for path in PROBED:
                t0 = time.perf_counter()
                response = client.get(path)
                latencies[path].append(time.perf_counter() - t0)
                if response.status_code != 200:
                    wrong.append(f"{path}: {response.status_code}")
            time.sleep(POLL_S)
    results.put({"latencies": latencies, "wrong": wrong})


async def _load(base_url: str, seconds: float, seeds, statuses: dict, wrong: list, times: list) -> dict:
    import httpx

    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
        async def one_client():
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                try:
                    response = await client.get(EXPENSIVE.format(next(seeds)))
                except httpx.HTTPError as exc:
                    wrong.append(f"{type(exc).__name__}: {exc!r}")
                    continue
                times.append(time.perf_counter() - t0)
                key = str(response.status_code)
                if response.status_code == 503:
                    key = "503+Retry-After" if response.headers.get("retry-after") == "1" else "503 without Retry-After"
                elif response.status_code != 200:
                    wrong.append(f"{response.status_code}: {response.text[:200]}")
                statuses[key] = statuses.get(key, 0) + 1

        spawn = multiprocessing.get_context("spawn")
        results = spawn.Queue()
        poller = spawn.Process(target=probe, args=(base_url, deadline - time.monotonic(), results), daemon=True)
        poller.start()
        await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
        probed = await asyncio.get_running_loop().run_in_executor(None, results.get, True, 60)
        poller.join(timeout=10)
    return probed


def overload_phase(port: int, args, figures: dict, details: dict) -> None:
    import httpx

    seconds = args.overload_seconds
    # "Already viewed": rendered once, then replayed by the response cache, which keys on
    # Accept-Encoding: so viewed with the poller's own client and headers.
    status = httpx.get(f"http://{HOST}:{port}{STEP_PAGE}", timeout=60).status_code
    if status != 200:
        raise RuntimeError(f"GET {STEP_PAGE} answered {status}, not 200")
    statuses: dict[str, int] = {}
    wrong: list[str] = []
    times: list[float] = []
    probed = asyncio.run(_load(f"http://{HOST}:{port}", seconds, itertools.count(700_000_000), statuses, wrong, times))
    wrong.extend(probed["wrong"])
    health, page = probed["latencies"]["/healthz"], probed["latencies"][STEP_PAGE]
    figures.update(
        overload_healthz_p50_ms=percentile(health, 50) * 1e3, overload_healthz_p99_ms=percentile(health, 99) * 1e3,
        overload_page_p50_ms=percentile(page, 50) * 1e3, overload_page_p99_ms=percentile(page, 99) * 1e3,
        overload_200=statuses.get("200", 0), overload_503=statuses.get("503+Retry-After", 0),
        overload_wrong=len(wrong),
    )
    details["overload"] = {
        "clients": CLIENTS, "seconds": seconds, "url": EXPENSIVE, "statuses": statuses, "wrong": wrong[:20],
        "polls": len(health), "healthz_max_ms": max(health, default=float("nan")) * 1e3,
        "page_max_ms": max(page, default=float("nan")) * 1e3,
        "expensive_p50_ms": statistics.median(times) * 1e3 if times else None,
    }
    log(f"overload {CLIENTS} clients {seconds:g} s: {statuses}, {len(wrong)} wrong; /healthz p50/p99 "
        f"{figures['overload_healthz_p50_ms']:.1f}/{figures['overload_healthz_p99_ms']:.1f} ms, viewed page "
        f"{figures['overload_page_p50_ms']:.1f}/{figures['overload_page_p99_ms']:.1f} ms ({len(health)} polls)")
