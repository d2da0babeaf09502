
"""Bounded load test of the real server on loopback: `python -m app` as a subprocess.

64 concurrent keep-alive connections for LOAD_SECONDS (default 10 s; docs/reference/reliability.md quotes a
30 s run: `LOAD_SECONDS=30 .venv/bin/python -m pytest tests/web/test_load.py -s`), a mix of full
pages, htmx fragments, cached tensors, uncached tensors (a new seed each), process runs and
deliberate 4xx. Asserts no errors, that identical requests got identical bodies, and that a
sample of every kind, made alone afterwards on a fresh server process (no cache shared with
the first), gets the same numbers and the same bytes: the server is deterministic and keeps
no per-request state. Prints the request
count and p50/p99 latency.

"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import re
import time
from dataclasses import dataclass, field

import httpx
import pytest
from live_server import running_server
from reporting import report
from run_async import run_async

pytestmark = [pytest.mark.slow, pytest.mark.slower_tier, pytest.mark.serial]
# real server processes under load: `make test-slower`, alone (serial), after its parallel phase

LOAD_SECONDS = float(os.environ.get("LOAD_SECONDS", "10"))
CONCURRENCY = 64


# -- the request mix ---------------------------------------------------------------------

STEPS = ["policy", "advantages", "clip", "reference"]
NODES = ["policy.logits", "ratio", "clipped", "advantages", "divergence", "output"]
HX = {"HX-Request": "true"}


@dataclass(frozen=True)
class Req:
    kind: str
    path: str
    headers: tuple = ()
    expect: int = 200


def request_mix():
    """An endless, deterministic sequence of requests; uncached tensors never repeat a seed."""
    fresh_seed = itertools.count(100_000)
    for i in itertools.count():
        step, node = STEPS[i % 4], NODES[i % len(NODES)]
        yield Req("page", f"/walkthroughs/toy_grpo/steps/{step}")
        yield Req("fragment", f"/walkthroughs/toy_grpo/steps/{step}?node={node}", tuple(HX.items()))
        yield Req("tensors-cached", f"/api/walkthroughs/toy_grpo/step?step={step}")
        yield Req("tensors-uncached", f"/api/walkthroughs/toy_grpo/step?step={step}&seed={next(fresh_seed)}")
        yield Req("fragment", f"/walkthroughs/toy_grpo/steps/clip?beta=0.{i % 8 + 1}", tuple(HX.items()))
        yield Req("process", f"/api/processes/{['r1-zero', 'r1', 'distillation'][i % 3]}?seed={i % 2}")
        yield Req("tensors-cached", f"/api/walkthroughs/toy_grpo/step?node={node}&seed={i % 4}")
        if i % 4 == 0:
            yield Req("4xx", "/api/walkthroughs/toy_grpo/step?seed=-1", expect=422)
            yield Req("4xx", "/api/walkthroughs/nope", expect=404)
        if i % 8 == 0:
            yield Req("compare", f"/api/processes/compare?seed={i % 2}")


DATA_VALUE = re.compile(r'data-value="([^"]*)"')


def fingerprint(req: Req, response: httpx.Response) -> tuple[str, str]:
    """(numbers, whole body) digests: JSON compared as parsed data, pages by their data-value numbers."""
    if response.headers.get("content-type", "").startswith("application/json"):
        canonical = json.dumps(response.json(), sort_keys=True)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        return digest, digest
    numbers = "|".join(DATA_VALUE.findall(response.text))
    # Pages name their assets by absolute URL (url_for): the server's own origin is not state.
    origin = f"{response.request.url.scheme}://{response.request.url.netloc.decode()}"
    body = response.text.replace(origin, "")
    return hashlib.sha256(numbers.encode()).hexdigest(), hashlib.sha256(body.encode()).hexdigest()


@dataclass
class Results:
    latencies: dict = field(default_factory=dict)  # kind -> [seconds]
    errors: list = field(default_factory=list)
    retried: list = field(default_factory=list)  # connection closed under a reused keep-alive request
    prints: dict = field(default_factory=dict)  # Req -> set of fingerprints

    def add(self, req: Req, seconds: float, response: httpx.Response | None, error: str | None = None):
        self.latencies.setdefault(req.kind, []).append(seconds)
        if error is not None:
            self.errors.append(f"{req.path}: {error}")
        elif response.status_code != req.expect:
            self.errors.append(f"{req.path} {dict(req.headers)}: {response.status_code} {response.text[:200]}")
        else:
            self.prints.setdefault(req, set()).add(fingerprint(req, response))

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.latencies.values())


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def drive(base_url: str, seconds: float, concurrency: int) -> Results:
    results = Results()
    mix = request_mix()
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:
        async def worker():
            while time.monotonic() < deadline:
                req = next(mix)
                t0 = time.perf_counter()
                try:
                    try:
                        response = await client.get(req.path, headers=dict(req.headers))
                    except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
                        # The keep-alive race: the server closes an idle pooled connection (uvicorn's
                        # 5 s keep-alive timeout) just as the client reuses it. Browsers retry such
                        # GETs once; so do we, and count them (bounded below), so a server that
                        # drops live connections still fails the test.
                        results.retried.append(f"{req.path}: {exc!r}")
                        response = await client.get(req.path, headers=dict(req.headers))
                    results.add(req, time.perf_counter() - t0, response)
                except httpx.HTTPError as exc:
                    results.add(req, time.perf_counter() - t0, None,
                                f"{type(exc).__name__}: {exc!r} after {time.perf_counter() - t0:.2f} s, "
                                f"{time.monotonic() - deadline + seconds:.1f} s into the run")
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def summary(results: Results, seconds: float) -> str:
    every = [x for v in results.latencies.values() for x in v]
    parts = [f"{results.count} requests in {seconds:.0f} s ({results.count / seconds:.0f}/s) at {CONCURRENCY} connections, "
             f"p50 {percentile(every, 50) * 1000:.0f} ms, p99 {percentile(every, 99) * 1000:.0f} ms, "
             f"{len(results.errors)} errors, {len(results.retried)} keep-alive retries"]
    for kind, values in sorted(results.latencies.items()):
        parts.append(f"  {kind:17} n={len(values):5}  p50 {percentile(values, 50) * 1000:6.0f} ms  "
                     f"p99 {percentile(values, 99) * 1000:6.0f} ms")
    return "\n".join(parts)


# The training paths behind the mix's process requests, run once before the clock starts:
# a new seed reruns whole paths (~0.2-1 s each), which would measure cold start, not load.
WARM_UP = [f"/api/processes/{p}?seed={seed}" for p in ("r1-zero", "r1", "distillation", "compare") for seed in (0, 1)]
WARM_UP += ["/walkthroughs/toy_grpo/steps/clip"]


def test_load_64_connections(tmp_path, request):
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning") as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for path in WARM_UP:  # a run is started by a POST (the page's is computed by GET alone)
                answer = client.get(path) if path.startswith("/walkthroughs/") else client.post(path)
                assert answer.status_code == 200, path
        results = run_async(drive(server.url, LOAD_SECONDS, CONCURRENCY))
        report(request, "load: " + summary(results, LOAD_SECONDS))
        assert not results.errors, f"{len(results.errors)} errors, e.g. {results.errors[:5]}"
        assert len(results.retried) <= max(2, results.count // 1000), f"connections dropped: {results.retried[:5]}"
        assert results.count > 100 and {"page", "fragment", "tensors-uncached", "process"} <= set(results.latencies)

        # Same request twice under load -> the same body.
        varying = {r.path: p for r, p in results.prints.items() if len(p) > 1}
        assert not varying, f"responses differ between identical requests: {list(varying)[:5]}"

        assert "Traceback" not in server.log(), server.log()[-3000:]

    # Each request again, alone, on a fresh server (so no cache of the first one can answer):
    # the same numbers (pages: every data-value) and the same body.
    by_kind: dict[str, list[Req]] = {}
    for req in results.prints:
        by_kind.setdefault(req.kind, []).append(req)
    sample = [r for reqs in by_kind.values() for r in reqs[:40]]
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning") as fresh:
        with httpx.Client(base_url=fresh.url, timeout=60) as client:
            for req in sample:
                response = client.get(req.path, headers=dict(req.headers))
                assert response.status_code == req.expect, (req, response.status_code)
                (under_load,) = results.prints[req]
                alone = fingerprint(req, response)
                assert alone[0] == under_load[0], f"{req.path}: numbers differ from the same request made under load"
                assert alone[1] == under_load[1], f"{req.path}: body differs (per-request state in the page?)"
