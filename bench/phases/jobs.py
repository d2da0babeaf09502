"""Training runs as jobs (issue 21), against the running app (its default: a runner child).

- A new tiny-LM path job (R1-Zero at `args.jobs_scale` of its steps, a seed never asked before)
  and a new toy path job (R1, likewise): seconds from the first GET to the GET that says done,
  polled every 0.1 s, so queueing, the claim, the run, the store and the read are all in it.
- The first read of a done job (the store read, the decode, the JSON): one GET's time.
- The paths API answering a finished job under wrk (`args.connections` connections): req/s,
  p50, p99. A done job's answer may be kept by the response cache, as a page's is: this is what a
  class polling one shared link costs.
"""
from __future__ import annotations

import json
import time

from bench.common import get, log
from bench.wrk import wrk

LM = "/api/walkthroughs/tiny_lm_grpo/paths/r1-zero?seed={seed}&scale={scale}"
TOY = "/api/walkthroughs/toy_grpo/paths/r1?seed={seed}"


def _until_done(port: int, path: str, timeout: float = 600) -> tuple[float, float, dict]:
    """(seconds to done, the done answer's own ms, its body): started by a POST (a GET never starts a
    run), then read by GET until done."""
    t0 = time.perf_counter()
    status, _h, body = get(port, path, method="POST")
    if status not in (200, 202):
        raise RuntimeError(f"POST {path} answered {status}: {body[:200]!r}")
    while True:
        t1 = time.perf_counter()
        status, _h, body = get(port, path)
        took = time.perf_counter() - t1
        if status == 200:
            answer = json.loads(body)
            if answer["state"] != "done":
                raise RuntimeError(f"{path}: {answer['state']}: {answer['error']}")
            return time.perf_counter() - t0, took * 1e3, answer
        if status != 202:
            raise RuntimeError(f"{path} answered {status}")
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"{path} not done after {timeout} s")
        time.sleep(0.1)


def jobs_phase(port: int, args, figures: dict, details: dict) -> None:
    seed = 10_000_000 + int(time.time()) % 1_000_000  # never asked of this store before
    lm = LM.format(seed=seed, scale=args.jobs_scale)
    figures["job_lm_scale"] = args.jobs_scale
    figures["job_lm_done_s"], figures["job_done_first_read_ms"], answer = _until_done(port, lm)
    figures["job_lm_run_s"] = answer["run"]["seconds"]
    figures["job_toy_done_s"], _ms, toy = _until_done(port, TOY.format(seed=seed))
    details["jobs"] = {"lm_path": lm, "lm_computed_by": answer["run"]["computed_by"],
                       "toy_computed_by": toy["run"]["computed_by"], "scale": args.jobs_scale}
    r = wrk(port, lm, duration=args.duration, connections=args.connections, threads=min(args.threads,
                                                                                       args.connections))
    figures["job_done_rps"], figures["job_done_p50_ms"], figures["job_done_p99_ms"] = r["rps"], r["p50_ms"], r["p99_ms"]
    log(f"jobs: tiny-LM path x{args.jobs_scale} done in {figures['job_lm_done_s']:.1f} s "
        f"(run {figures['job_lm_run_s']:.1f} s), toy path {figures['job_toy_done_s']:.2f} s; "
        f"finished job: first read {figures['job_done_first_read_ms']:.1f} ms, {r['rps']:.0f} req/s, "
        f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
