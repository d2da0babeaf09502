
"""Resident memory of the real server (VmRSS of the `python -m app` subprocess and its compute
worker processes) stays bounded.

The engine's results are cached in bounded LRUs (app/engine/compute.py: run_grpo_step holds
512 weight units, a G<=63 result weighing one; stage_step 256; run_process 64) and whole
responses in a cache bounded by entries and bytes (app/response_cache.py). So once those are
full, more distinct requests must not grow the process: the RSS after 10,000 distinct
requests is compared with the RSS after the first 1,000 (900 of them distinct tensor runs,
more than the result cache holds).
"""
from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import httpx
import pytest
from live_server import running_server
from reporting import report
from run_async import run_async

from app.kinds.toy.engine.step import run_grpo_step

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase (10,000 requests, ~4 min)

# Growth allowed between 1,000 and 10,000 distinct requests. The result cache is full at 1,000
# (at most 512 entries of ~40 KB here, ~20 MB), the response cache fills up to its own bound
# (2,048 bodies of a few KB here, ~10 MB), and what else may grow is allocator slack: glibc keeps per-thread arenas for up to 40 threadpool
# threads, and freed response buffers stay resident. An unbounded cache would add
# 9,000 x ~35 KB ~ 300 MB, far past this bound.
MAX_GROWTH_MB = 64

# Largest results: group_size=4096 after 50 iterations of 16 updates (~8 MB of RSS each, cached as
# Python lists). Once the result cache holds all it may, more of them must replace, not add.
# Allowed: the whole-response cache keeps their gzipped bodies (14 KB each) plus allocator noise.
BIG = "group_size=4096&iteration=50&inner_steps=16&inner_step=15&node=input"
MAX_PLATEAU_GROWTH_MB = 16


def _status(pid: int) -> dict[str, str]:
    return dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)


def rss_mb(pid: int) -> float:
    """VmRSS of the server and of its children: the compute worker processes, where the engine's
    result caches live (app/web/compute_pool.py), and multiprocessing's resource tracker."""
    total = int(_status(pid)["VmRSS"].split()[0])
    for path in Path("/proc").glob("[0-9]*"):
        try:
            status = _status(int(path.name))
        except (OSError, ValueError):
            continue
        if int(status.get("PPid", "0")) == pid and "VmRSS" in status:
            total += int(status["VmRSS"].split()[0])
    return total / 1024


def distinct_requests():
    """Every request unique: tensors with a new seed each (G=32, no earlier updates: cheap to
    compute, ~40 KB cached), and htmx fragments with a new beta, step and node. (Pages keep the
    seed: a page with a new seed also runs all three training paths for its comparison panel,
    ~0.4 s each, which would make this test a CPU benchmark.)"""
    steps, nodes = ["policy", "advantages", "clip", "reference"], ["ratio", "clipped", "advantages", "policy.logits"]
    for i in itertools.count():
        if i % 10 == 9:
            yield (f"/walkthroughs/toy_grpo/steps/{steps[i % 4]}?node={nodes[(i // 4) % 4]}"
                   f"&beta={i / 100_000:g}&iteration=0&inner_step=0&group_size=2", {"HX-Request": "true"})
        else:
            yield f"/api/walkthroughs/toy_grpo/step?node=input&seed={i}&iteration=0&inner_step=0&group_size=32", {}


async def send(base_url: str, requests, n: int, concurrency: int = 16, budget_s: float = 240) -> list[str]:
    errors: list[str] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    deadline = time.monotonic() + budget_s  # a guard against a server that slows to a crawl
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
        remaining = iter(range(n))

        async def worker():
            for _ in remaining:
                if time.monotonic() > deadline:
                    errors.append(f"not done within {budget_s} s")
                    return
                path, headers = next(requests)
                response = await client.get(path, headers=headers)
                if response.status_code != 200:
                    errors.append(f"{path}: {response.status_code} {response.text[:200]}")
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return errors


def test_rss_after_10000_distinct_requests_is_bounded(tmp_path, request):
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning") as server:
        requests = distinct_requests()
        assert not run_async(send(server.url, requests, 1_000))
        after_1k = rss_mb(server.proc.pid)
        errors = run_async(send(server.url, requests, 9_000))
        after_10k = rss_mb(server.proc.pid)
        report(request, f"memory: RSS {after_1k:.0f} MB after 1,000 distinct requests, {after_10k:.0f} MB after "
                        f"10,000 (+{after_10k - after_1k:.0f} MB; bound +{MAX_GROWTH_MB} MB)")
        assert not errors, errors[:5]
        assert after_10k - after_1k <= MAX_GROWTH_MB, (
            f"RSS grew {after_10k - after_1k:.0f} MB between 1,000 and 10,000 distinct requests")


def test_result_cache_is_bounded_in_bytes_not_only_in_entries(tmp_path, request):
    """The largest results (G=4096: ~8 MB of RSS each, 1.3 MB pickled) must not pin maxsize x 8 MB.

    The cache weighs a result 1 + G // 64 (65 here), so it holds CAPACITY = 512 // 65 = 7 of
    them. Each compute worker process has its own cache, and which worker takes a request is up
    to the pool, so the server runs one worker (COMPUTE_SLOTS=1): after WARM = CAPACITY + 2
    maximal results its cache holds all it ever will, and the next MORE must replace, not add.
    (CI stop 38 ran two workers with WARM 12: neither cache was full yet, and 8 more added 24 MB.)
    A cache bounded only by its entry count (512) would add MORE x ~8 MB here.
    """
    capacity = run_grpo_step.maxsize // (1 + 4096 // 64)
    warm, more = capacity + 2, 8
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning", env={"COMPUTE_SLOTS": "1"}) as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            def fill(seeds):
                for seed in seeds:
                    assert client.get(f"/api/walkthroughs/toy_grpo/step?{BIG}&seed={seed}").status_code == 200
            fill([0])  # transient buffers of one maximal response
            start = rss_mb(server.proc.pid)
            fill(range(1, warm + 1))
            after_warm = rss_mb(server.proc.pid)
            fill(range(warm + 1, warm + more + 1))
            after_more = rss_mb(server.proc.pid)
    per_entry = (after_warm - start) / warm
    report(request, f"memory: {warm} maximal results +{after_warm - start:.0f} MB (~{per_entry:.1f} MB each while "
                    f"they fit), {more} more +{after_more - after_warm:.0f} MB (bound +{MAX_PLATEAU_GROWTH_MB} MB)")
    assert after_more - after_warm <= MAX_PLATEAU_GROWTH_MB, (
        f"{more} more maximal results added {after_more - after_warm:.0f} MB: the result cache keeps them all "
        f"(~{per_entry:.1f} MB each; {run_grpo_step.maxsize} entries would be ~{per_entry * run_grpo_step.maxsize:.0f} MB)")
