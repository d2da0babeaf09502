"""The engine in this process, with no web layer: one GRPO step, how the step scales with
the group size G (time and memory), and how a whole training path scales with its
iteration count.

In-process on purpose: the step time is what the uncached-latency target subtracts
from the HTTP latency to get the web layer's own cost. torch runs on one thread, as in
the app, and every call goes past the engine's caches, so each one computes.
"""
from __future__ import annotations

import gc
import importlib
import math
import time
import tracemalloc
from pathlib import Path

from bench.common import GROUP_SIZES, ROOT, SCALES, log, median


def _rss_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    try:  # Linux >= 4.0: "5" resets VmHWM to the current RSS
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def engine_phase(args, figures: dict, details: dict) -> None:
    """Step time alone, then scaling in G and in iterations. Leaves `args.measure_step`
    behind for the HTTP phase, which takes more step samples right next to its wrk runs."""
    # Imported here, not at the top: the pure functions of the bench load without torch or the app.
    import torch
    torch.set_num_threads(1)  # as the app does (TORCH_THREADS=1)
    from app.engine.runtime.device import resolve_device
    from app.kinds.toy.domain.process_spec import load_processes
    from app.kinds.toy.engine.params import GRPOParams
    from app.kinds.toy.engine.step import run_grpo_step

    device = resolve_device(args.device)
    step = getattr(run_grpo_step, "__wrapped__", run_grpo_step)  # past the cache: every call computes

    def timed(params):
        w0, c0 = time.perf_counter(), time.process_time()
        result = step(params, device)
        return time.perf_counter() - w0, time.process_time() - c0, result

    for i in range(args.engine_warmup):
        step(GRPOParams(seed=900_000 + i), device)
    seeds = iter(range(10**6))  # shared by every call below: no seed is computed twice

    def measure_step(n: int, label: str) -> None:
        """n uncached steps (fresh seeds); called right before and after the uncached
        wrk run, so the step time and the latency it is compared with share the machine's load."""
        walls, cpus = details.setdefault("_step_walls", []), details.setdefault("_step_cpus", [])
        w_run = []
        for _ in range(n):
            w, c, _ = timed(GRPOParams(seed=next(seeds)))
            walls.append(w)
            cpus.append(c)
            w_run.append(w)
        details.setdefault("engine_step_ms_by_run", {})[label] = median(w_run) * 1e3
        figures["engine_step_ms"] = median(walls) * 1e3
        figures["engine_step_cpu_ms"] = median(cpus) * 1e3
        log(f"engine step ({label}) {median(w_run) * 1e3:.2f} ms wall; so far {figures['engine_step_ms']:.2f} ms wall, "
            f"{figures['engine_step_cpu_ms']:.2f} ms CPU (median of {len(walls)})")

    args.measure_step = measure_step
    measure_step(args.engine_runs // 3, "alone")

    _group_scaling(args, figures, details, step, timed, device, GRPOParams)
    _process_scaling(args, figures, details, importlib.import_module("app.kinds.toy.engine.processes"),
                     load_processes(ROOT / "walkthroughs" / "processes.toml"))


def _group_scaling(args, figures: dict, details: dict, step, timed, device, params_cls) -> None:
    """Scaling in G: time (CPU time: robust to other load on the machine) and memory."""
    scaling = {}
    for g in GROUP_SIZES:
        step(params_cls(group_size=g, seed=800_000), device)  # warm this size
        runs = [timed(params_cls(group_size=g, seed=700_000 + r)) for r in range(args.scaling_runs)]
        gc.collect()
        can_reset = _reset_peak_rss()
        rss0 = _rss_kib("VmRSS")
        # tracemalloc sees Python objects only (torch's tensor storage is not traced):
        # its peak is the step's Python garbage, "current" what the result keeps alive.
        tracemalloc.start()
        result = step(params_cls(group_size=g, seed=600_000), device)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        hwm = _rss_kib("VmHWM") if can_reset else _rss_kib("VmRSS")  # fallback: RSS with the result alive
        del result
        gc.collect()
        scaling[g] = {"wall_ms": median([r[0] for r in runs]) * 1e3, "cpu_ms": median([r[1] for r in runs]) * 1e3,
                      "py_peak_kib": peak / 1024, "result_kib": current / 1024,
                      "rss_peak_delta_kib": (hwm - rss0) if hwm is not None and rss0 is not None else float("nan"),
                      "rss_measure": "VmHWM after reset" if can_reset else "VmRSS with the result alive"}
        figures[f"step_ms_g{g}"] = scaling[g]["cpu_ms"]
        figures[f"step_py_peak_kib_g{g}"] = scaling[g]["py_peak_kib"]
        figures[f"step_result_kib_g{g}"] = scaling[g]["result_kib"]
        figures[f"step_rss_peak_delta_kib_g{g}"] = scaling[g]["rss_peak_delta_kib"]
        log(f"G={g:5d}: {scaling[g]['cpu_ms']:.2f} ms CPU ({scaling[g]['wall_ms']:.2f} wall), python peak "
            f"{peak / 1024:.0f} KiB, result kept {current / 1024:.0f} KiB, "
            f"RSS peak +{scaling[g]['rss_peak_delta_kib']} KiB")
    details["group_scaling"] = scaling
    figures["step_growth_g4096_over_g8"] = scaling[4096]["cpu_ms"] / scaling[8]["cpu_ms"]
    # Empirical order k in time ~ G^k between G=8 and G=4096 (1 = linear).
    figures["step_growth_order"] = math.log(figures["step_growth_g4096_over_g8"]) / math.log(4096 / 8)


def _process_scaling(args, figures: dict, details: dict, procs, catalog) -> None:
    """A whole training path as its iteration count doubles, uncached."""
    def clear_caches():
        # Whichever of the two names the module caches under: both are cleared.
        for name in ("run_process", "_run_process"):
            fn = getattr(procs, name, None)
            if fn is not None and hasattr(fn, "cache_clear"):
                fn.cache_clear()

    clear_caches()
    procs.run_process(catalog, args.process, 424_242, iterations_scale=1)  # warm-up
    path = {}
    for s in SCALES:
        runs = []
        for r in range(args.process_runs):
            clear_caches()  # the path and every path it builds on are recomputed
            w0, c0 = time.perf_counter(), time.process_time()
            procs.run_process(catalog, args.process, 1000 + r, iterations_scale=s)
            runs.append((time.perf_counter() - w0, time.process_time() - c0))
        path[s] = {"wall_s": median([w for w, _ in runs]), "cpu_s": median([c for _, c in runs])}
        figures[f"process_s_x{s}"] = path[s]["cpu_s"]
        log(f"process {args.process} x{s}: {path[s]['cpu_s']:.3f} s CPU ({path[s]['wall_s']:.3f} wall)")
    clear_caches()
    details["process_scaling"] = {"process": args.process, **{f"x{s}": v for s, v in path.items()}}
    figures["process_growth_x8_over_x1"] = path[8]["cpu_s"] / path[1]["cpu_s"]
    figures["process_growth_order"] = math.log(figures["process_growth_x8_over_x1"]) / math.log(8)
