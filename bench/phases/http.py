"""HTTP throughput and latency of each endpoint, under wrk, against one running app.

Measured: /healthz (the reference: the framework's own ceiling), the tensors API
cached and uncached, the full step page and its htmx fragment. /healthz runs first
and last, and the engine's in-process step time is measured right before and after
the 1-connection uncached run, so that figures compared by a target share the
machine's load at the time.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from bench.common import ACCEPT_ENCODING, STEP_PAGE, TENSORS, get, log
from bench.wrk import wrk

# Every request asks for a seed never asked before, so every request misses the
# engine's cache. Seeds: base + thread index * stride + request number.
UNCACHED_LUA = """
local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end
function init(args)
  seed = tonumber(args[1]) + (id or 0) * tonumber(args[2])
end
function request()
  seed = seed + 1
  return wrk.format(nil, wrk.path .. "&seed=" .. string.format("%d", seed))
end
"""

# One uncached request takes ~0.4 s on a quiet 2-core machine, and the server may
# still be finishing the many-connection run's requests when this run starts: in a
# 1 s smoke run, one connection then completed no request at all (CI, stop 37), and
# wrk's figures were empty. Five seconds always hold several.
UNCACHED_C1_MIN_S = 5.0


def http_phase(port: int, args, figures: dict, details: dict) -> None:
    d, c, t = args.duration, args.connections, args.threads
    hx = {"HX-Request": "true"}
    seed_stride = 1_000_000
    # Warm-up: templates compile, the cached parameter set gets computed once.
    for path, headers in (("/healthz", None), (TENSORS, None), (STEP_PAGE, None), (STEP_PAGE, hx),
                          (TENSORS + "&seed=1999999999", None)):
        for _ in range(args.warmup_requests):
            status, _h, _b = get(port, path, {"Accept-Encoding": ACCEPT_ENCODING, **(headers or {})})
            if status != 200:
                raise RuntimeError(f"GET {path} ({headers}) answered {status}, not 200")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(UNCACHED_LUA)
        lua = Path(f.name)
    try:
        runs = {}
        # The two uncached runs start from seed ranges far apart, so the second never
        # meets a seed the first already put in the cache.
        plan = [
            ("healthz_before", "/healthz", {"connections": c}),
            ("healthz_c1_before", "/healthz", {"connections": 1}),
            ("tensors_cached", TENSORS, {"connections": c}),
            ("tensors_uncached", TENSORS, {"connections": c, "lua": lua, "lua_args": (10_000_000, seed_stride)}),
            ("step_before", None, None),
            ("tensors_uncached_c1", TENSORS, {"connections": 1, "lua": lua, "lua_args": (20_000_000, seed_stride),
                                              "min_duration": UNCACHED_C1_MIN_S}),
            ("step_after", None, None),
            ("step_page", STEP_PAGE, {"connections": c}),
            ("fragment", STEP_PAGE, {"connections": c, "headers": hx}),
            ("healthz_c1_after", "/healthz", {"connections": 1}),
            ("healthz_after", "/healthz", {"connections": c}),
        ]
        for name, path, kw in plan:
            if path is None:  # the engine's in-process step time, next to the uncached latency
                # args.measure_step is set by the engine phase, which runs before this one.
                args.measure_step(args.engine_runs // 3, name.replace("step_", "next to wrk, "))
                continue
            conns = kw.pop("connections")
            duration = max(d, kw.pop("min_duration", 0.0))
            runs[name] = r = wrk(port, path, duration=duration, connections=conns, threads=min(t, conns), **kw)
            log(f"wrk {name:22s} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms"
                + (f"  non-2xx {r['non_2xx']}" if r["non_2xx"] else ""))
    finally:
        lua.unlink(missing_ok=True)
    details["wrk"] = runs

    # The better of the two /healthz runs is the reference, so a target is never met
    # merely because the reference ran while the machine was busy.
    before, after = runs["healthz_before"], runs["healthz_after"]
    best = before if before["rps"] >= after["rps"] else after
    figures.update(healthz_rps_before=before["rps"], healthz_rps_after=after["rps"], healthz_rps=best["rps"],
                   healthz_p50_ms=best["p50_ms"], healthz_p99_ms=best["p99_ms"])
    for name in ("tensors_cached", "tensors_uncached", "step_page", "fragment"):
        r = runs[name]
        figures.update({f"{name}_rps": r["rps"], f"{name}_p50_ms": r["p50_ms"], f"{name}_p99_ms": r["p99_ms"]})
    b1, a1 = runs["healthz_c1_before"]["p50_ms"], runs["healthz_c1_after"]["p50_ms"]
    figures.update(healthz_c1_p50_ms_before=b1, healthz_c1_p50_ms_after=a1, healthz_c1_p50_ms=min(b1, a1),
                   tensors_uncached_c1_p50_ms=runs["tensors_uncached_c1"]["p50_ms"],
                   tensors_uncached_c1_p99_ms=runs["tensors_uncached_c1"]["p99_ms"])
    details["http_errors"] = {k: r["non_2xx"] + r["socket_errors"] for k, r in runs.items()
                              if r["non_2xx"] or r["socket_errors"]}
