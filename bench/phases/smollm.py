"""The real pretrained model (issue 33): SmolLM2-135M-Instruct's checkpoint load, one live GRPO step, its
finished step pages, and the layout of its 1,825-node graph.

`checkpoint.load` keeps one model per process, so the load and the step are each measured in a fresh
process (`python -m bench.phases.smollm load|step DATA_DIR ...`, which prints one JSON line), all over one
temporary data directory (removed after):

- load, cold: the first process over the empty directory: the GGUF's 4-bit tensors dequantised to float32
  and written as safetensors under DATA_DIR/models, the tokenizer and chat template read from its
  metadata and kept beside them; cached: the second process, the same directory (the safetensors read,
  the GGUF only hashed). `checkpoint.load`'s wall time; the process's import of torch and the kind apart.
- step, cold: that second process then runs `run_smol_step(SmolParams(group_size=8,
  max_new_tokens=48), loaded, device)` once: the first step after the load, with torch's threads as the
  job sets them (engine/threads.py: SMOLLM_THREADS, else every CPU the process may use). Its wall time, the step's
  own `stage_seconds` and the process's peak RSS (ru_maxrss, read after the step).
- step pages: `python -m app` (the same command as every phase) with DATA_DIR the same directory (the
  converted weights cached, an empty job store) and DEFAULT_RUNS off (no other run competes);
  `POST /walkthroughs/smollm_grpo/steps/sample` (the page's Run button) starts the default step; while it
  runs, the compute workers are warmed (started, the export parsed: `_warm_up`); the progress box is
  polled until it answers HX-Redirect (done, POST -> done reported); then two GETs of
  each of the six step pages, timed request sent -> body read (gzip): the first GET of each renders it
  from the stored result (each compute worker decodes the result once), the second is the response
  cache's; then one more with `Accept-Encoding: identity` (another response-cache key: rendered again,
  by a worker that has rendered smollm pages before). The target is on the slowest first GET.
- R1-Zero run: a third process over the same directory (cached load) runs `run_r1_zero(SmolRunParams())`,
  the paths panel's run (20 steps of G 8 x 32 tokens), threads as its job sets them: its wall time, the
  median step, the peak RSS, and per step the mean reward, length, KL and whether the group tied.
- graph layout, in this process: `build_graph_view` on the shipped snapshot
  walkthroughs/smollm_grpo.tensorviz.json as app/views/screen.py calls it, (a) the overview (every module
  closed, compact) and (b) policy and policy.blocks.12 open, each with graph_dot's caches cleared first,
  so `dot` runs every time: the call's wall time and dot's own (`layout_seconds`), median.

The real measurement needs the installed checkpoint (`checkpoint.installed_gguf()`; SMOLLM_GGUF is
removed from the children's environment). `--smoke` writes the suite's tiny GGUF (13 blocks of width 64,
tests/kinds/smollm/smollm_tiny_gguf.py) and points SMOLLM_GGUF at it, with G 2 x 6 tokens.
"""
from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

from bench.common import ACCEPT_ENCODING, ROOT, get, log, median, server

WALKTHROUGH = "smollm_grpo"
STEPS = ("sample", "advantages", "ratio", "blocks", "attention", "update")
STAGES = ("sampling", "scoring", "inner steps", "record", "summaries", "update")  # run_smol_step's stage_seconds
GROUP_SIZE, NEW_TOKENS = 8, 48  # the issue's step (SmolParams' defaults)
SMOKE_GROUP_SIZE, SMOKE_NEW_TOKENS = 2, 6
RUN, RUN_SMOKE = (20, 8, 32), (2, 2, 6)  # the R1-Zero run's (steps, G, T): the panel's run (SmolRunParams' defaults)
TINY_BLOCKS = 13  # the suite's tiny GGUF (tests/conftest.py): block 12, the default attention block, exists
SNAPSHOT = ROOT / "walkthroughs" / f"{WALKTHROUGH}.tensorviz.json"
EXPANDED = ("policy", "policy.blocks.12")  # the view (b) of the layout
GGUF_ENV = "SMOLLM_GGUF"  # app/kinds/smollm/engine/checkpoint.py's (not imported: the children must set it)


def stage_key(stage: str) -> str:
    return f"smol_stage_{stage.replace(' ', '_')}_s"


# ---------------------------------------------------------------- the children

def _child_load(data_dir: Path):
    """(figures of checkpoint.load in this fresh process, the LoadedModel)."""
    t0 = time.perf_counter()
    from app.kinds.smollm.engine import checkpoint

    imported = time.perf_counter() - t0
    t1 = time.perf_counter()
    loaded = checkpoint.load(data_dir)
    wall = time.perf_counter() - t1
    meta = {k: v for k, v in loaded.meta.items() if isinstance(v, (bool, int, float, str))}
    return {"import_s": imported, "load_s": wall, "load_seconds": loaded.load_seconds, "meta": meta,
            "gguf": str(checkpoint.find_gguf()), "n_layer": loaded.config.n_layer,
            "parameters": sum(p.numel() for p in loaded.model.parameters()),
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, loaded


def _child_step(data_dir: Path, group_size: int, new_tokens: int, device: str) -> dict:
    from app.engine.runtime.device import set_threads
    from app.kinds.smollm.engine.threads import job_threads

    threads = job_threads()
    set_threads(threads)  # as the job does (step_task.run_step: SMOLLM_THREADS, else every CPU)
    out, loaded = _child_load(data_dir)
    from app.kinds.smollm.engine.params import SmolParams
    from app.kinds.smollm.engine.step import run_smol_step

    t0 = time.perf_counter()
    result = run_smol_step(SmolParams(group_size=group_size, max_new_tokens=new_tokens), loaded, device)
    wall = time.perf_counter() - t0
    out.update(step_s=wall, torch_threads=threads, device=device, stage_seconds=dict(result.stage_seconds),
               step_peak_rss_mb=result.peak_rss_mb, rss_before_mb=result.rss_before_mb,
               lengths=[c.length for c in result.completions], rewards=[c.reward for c in result.completions],
               maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def _child_run(data_dir: Path, steps: int, group_size: int, new_tokens: int, device: str) -> dict:
    """R1-Zero on the model (engine/r1_zero_run.py) as its job runs it: threads as its job sets them."""
    from app.engine.runtime.device import set_threads
    from app.kinds.smollm.engine.threads import job_threads

    threads = job_threads()
    set_threads(threads)  # as the job does (run_task.run)
    out, loaded = _child_load(data_dir)
    from app.kinds.smollm.engine.r1_zero_run import run_r1_zero
    from app.kinds.smollm.engine.run_params import SmolRunParams

    t0 = time.perf_counter()
    result = run_r1_zero(SmolRunParams(steps=steps, group_size=group_size, max_new_tokens=new_tokens), loaded, device)
    wall = time.perf_counter() - t0
    points = result.points
    out.update(run_s=wall, torch_threads=threads, device=device, steps=len(points),
               step_seconds=[p.seconds for p in points], rewards=[p.reward_mean for p in points],
               lengths=[p.length_mean for p in points], kls=[p.kl_mean for p in points],
               tied=[p.tied for p in points], maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def _child(argv: list[str]) -> int:
    what, data_dir = argv[0], Path(argv[1])
    if what == "load":
        out = _child_load(data_dir)[0]
    elif what == "step":
        out = _child_step(data_dir, int(argv[2]), int(argv[3]), argv[4])
    elif what == "run":
        out = _child_run(data_dir, int(argv[2]), int(argv[3]), int(argv[4]), argv[5])
    else:
        raise SystemExit(f"usage: python -m bench.phases.smollm load|step|run DATA_DIR [(STEPS) G T DEVICE], "
                         f"not {argv}")
    print(json.dumps(out))
    return 0


def _run_child(args, env: dict, *parts: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([args.python, "-m", "bench.phases.smollm", *parts], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"smollm {parts[0]} child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0  # start -> exit: the interpreter, imports, load, work
    return out


# ---------------------------------------------------------------- the phase

def _tiny_gguf(folder: Path) -> Path:
    """tests/kinds/smollm/smollm_tiny_gguf.py's write_tiny_gguf, loaded by its path (the bench imports no
    test package), as tests/conftest.py writes it."""
    spec = importlib.util.spec_from_file_location("bench_smollm_tiny_gguf",
                                                  ROOT / "tests" / "kinds" / "smollm" / "smollm_tiny_gguf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = folder / "tiny-smollm2.gguf"
    module.write_tiny_gguf(path, n_layer=TINY_BLOCKS)
    return path


def smollm_phase(args, figures: dict, details: dict, log_path: Path) -> None:
    from app.kinds.smollm.engine import checkpoint

    work = Path(tempfile.mkdtemp(prefix="bench-smollm-"))
    data = work / "data"
    try:
        if args.smoke:
            gguf = _tiny_gguf(work)
            group_size, new_tokens = SMOKE_GROUP_SIZE, SMOKE_NEW_TOKENS
        else:
            gguf = checkpoint.installed_gguf()
            if gguf is None:
                raise RuntimeError(f"the smollm phase needs SmolLM2's GGUF file: {checkpoint.INSTALL_HINT}")
            group_size, new_tokens = GROUP_SIZE, NEW_TOKENS
        env = {k: v for k, v in os.environ.items() if k != GGUF_ENV}
        if args.smoke:
            env[GGUF_ENV] = str(gguf)
        figures.update(smol_group_size=group_size, smol_new_tokens=new_tokens)
        cold = _run_child(args, env, "load", str(data))
        log(f"smollm load, cold: {cold['load_s']:.2f} s (converted: {cold['meta'].get('converted')}; "
            f"import {cold['import_s']:.1f} s, process {cold['process_s']:.1f} s)")
        free = _available_gib()
        log(f"smollm step G {group_size} x {new_tokens} on {args.resolved_device} ({free:.1f} GiB available)...")
        # the second process over the same directory: its load is the cached one, then the step
        step = _run_child(args, env, "step", str(data), str(group_size), str(new_tokens), args.resolved_device)
        step["available_gib_before"] = free
        log(f"smollm load, cached: {step['load_s']:.2f} s (converted: {step['meta'].get('converted')}; "
            f"import {step['import_s']:.1f} s)")
        runs = {"cold": cold, "step": step}
        figures.update(smol_load_cold_s=cold["load_s"], smol_load_cached_s=step["load_s"])
        figures.update(smol_step_s=step["step_s"], smol_step_peak_rss_mb=step["maxrss_mb"],
                       smol_step_torch_threads=step["torch_threads"], smol_blocks=step["n_layer"])
        for stage in STAGES:
            figures[stage_key(stage)] = step["stage_seconds"][stage]
        log(f"smollm step: {step['step_s']:.1f} s ({step['stage_seconds']}), peak RSS {step['maxrss_mb']:.0f} MB")
        steps, run_g, run_t = (RUN_SMOKE if args.smoke else RUN)
        log(f"smollm R1-Zero run: {steps} steps of G {run_g} x {run_t} on {args.resolved_device}...")
        run = _run_child(args, env, "run", str(data), str(steps), str(run_g), str(run_t), args.resolved_device)
        runs["run"] = run
        figures.update(smol_run_steps=run["steps"], smol_run_group_size=run_g, smol_run_new_tokens=run_t,
                       smol_run_s=run["run_s"], smol_run_step_median_s=median(run["step_seconds"]),
                       smol_run_peak_rss_mb=run["maxrss_mb"])
        log(f"smollm R1-Zero run: {run['run_s']:.1f} s (median step {median(run['step_seconds']):.1f} s), "
            f"rewards {[round(r, 3) for r in run['rewards']]}, peak RSS {run['maxrss_mb']:.0f} MB")
        details["smollm"] = {"gguf": str(gguf), "smoke": args.smoke, "device": args.resolved_device,
                             "group_size": group_size, "new_tokens": new_tokens, "runs": runs}
        _pages(args, figures, details, log_path, env, data, group_size, new_tokens)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _layout(args, figures, details)


def _available_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def _pages(args, figures: dict, details: dict, log_path: Path, env: dict, data: Path, group_size: int,
           new_tokens: int) -> None:
    params = {} if (group_size, new_tokens) == (GROUP_SIZE, NEW_TOKENS) else \
        {"group_size": group_size, "max_new_tokens": new_tokens}
    query = urlencode(params)
    suffix = f"?{query}" if query else ""
    base = f"/walkthroughs/{WALKTHROUGH}"
    # None removes a variable (server() merges env into os.environ): the real run's app reads the installed file
    app_env = {"DATA_DIR": str(data), "DEFAULT_RUNS": "false", GGUF_ENV: env.get(GGUF_ENV)}
    timeout = 120 if args.smoke else 1800
    pages = []
    with server(args.python, args.device, args.log_level, log_path, env=app_env) as (port, _proc):
        t0 = time.perf_counter()
        status, _h, _b = get(port, f"{base}/steps/sample{suffix}", method="POST", timeout=60)
        if status != 303:
            raise RuntimeError(f"POST {base}/steps/sample{suffix}: {status}, not 303")
        warm = _warm_up(port, base, params)  # while the runner computes the step
        progress = f"{base}/smollm-progress?{urlencode({**params, 'step': 'sample'})}"
        polls = 0
        while True:
            status, headers, _b = get(port, progress, {"HX-Request": "true"}, timeout=60)
            polls += 1
            if status != 200:
                raise RuntimeError(f"GET {progress}: {status}")
            if "hx-redirect" in headers:
                break
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"the step was not done within {timeout} s")
            time.sleep(0.1 if args.smoke else 1.0)
        done = time.perf_counter() - t0
        figures["smol_page_step_done_s"] = done
        log(f"smollm pages: POST -> done in {done:.1f} s ({polls} polls)")
        for step in STEPS:
            path = f"{base}/steps/{step}{suffix}"
            row = {"step": step, "path": path}
            for which in ("first", "second"):
                t1 = time.perf_counter()
                status, headers, body = get(port, path, {"Accept-Encoding": ACCEPT_ENCODING}, timeout=120)
                row[which] = {"ms": (time.perf_counter() - t1) * 1e3, "status": status, "bytes": len(body),
                              "encoding": headers.get("content-encoding", "identity")}
            pages.append(row)
            figures[f"smol_page_{step}_ms"] = row["first"]["ms"]
            log(f"smollm page {step}: {row['first']['ms']:.0f} ms first GET, {row['second']['ms']:.1f} ms again "
                f"({row['first']['bytes']} B {row['first']['encoding']})")
        for row in pages:  # identity: another response-cache key, so rendered again, by a worker that has rendered
            t1 = time.perf_counter()
            status, headers, body = get(port, row["path"], {"Accept-Encoding": "identity"}, timeout=120)
            row["rendered_again"] = {"ms": (time.perf_counter() - t1) * 1e3, "status": status, "bytes": len(body)}
        log("smollm pages rendered again (identity): "
            + " / ".join(f"{row['rendered_again']['ms']:.0f}" for row in pages) + " ms")
    first = [p["first"]["ms"] for p in pages]
    figures.update(smol_page_median_ms=median(first), smol_page_max_ms=max(first),
                   smol_page_cached_median_ms=median([p["second"]["ms"] for p in pages]),
                   smol_page_rendered_again_median_ms=median([p["rendered_again"]["ms"] for p in pages]))
    details["smollm"]["pages"] = {"query": query, "step_done_s": done, "polls": polls, "warm_up": warm,
                                  "pages": pages}
    bad = [p["path"] for p in pages if {p[k]["status"] for k in ("first", "second", "rendered_again")} != {200}]
    if bad:
        details.setdefault("problems", []).append(f"smollm step pages not 200: {bad}")


def _warm_up(port: int, base: str, params: dict) -> list[dict]:
    """Every compute worker started and holding the parsed export: the app answers /healthz before its
    workers have started (record.py's warm-up), and each worker parses the 4.8 MB export on its first
    request of the walkthrough (~1-2.5 s). The overview of a step nobody started (another seed each, so
    no run's page and no measured view's layout is cached), as many at once as there are workers, twice."""
    from app.web.settings import Settings

    slots = Settings().compute_slots
    seed = 40_000_000 + int(time.time()) % 1_000_000
    rounds = []

    def one(k: int) -> tuple[int, float]:
        path = f"{base}/steps/sample?{urlencode({**params, 'seed': seed + k, 'view': 'overview'})}"
        for _ in range(60):  # 503 + Retry-After while no worker is up yet
            t1 = time.perf_counter()
            status = get(port, path, timeout=120)[0]
            if status != 503:
                return status, time.perf_counter() - t1
            time.sleep(0.5)
        return status, time.perf_counter() - t1

    with ThreadPoolExecutor(slots) as pool:
        for rnd in range(2):
            got = list(pool.map(one, range(rnd * slots, (rnd + 1) * slots)))
            rounds.append({"status": [g[0] for g in got], "seconds": [g[1] for g in got]})
            if {g[0] for g in got} != {200}:
                raise RuntimeError(f"warm-up of the compute workers on {base}: {rounds}")
    log(f"smollm pages: {slots} compute workers warm: {rounds}")
    return rounds


def _layout(args, figures: dict, details: dict) -> None:
    from app.house import registry
    from app.views import meaning

    # the kinds' words for nodes, bound as an app binds them for a request (app/web/context.py): the boxes'
    # labels (and so their sizes) as drawn
    with meaning.described_by(tuple(k.describe for k in registry().kinds if k.describe is not None)):
        _measure_layout(args, figures, details)


def _measure_layout(args, figures: dict, details: dict) -> None:
    from app.domain.snapshot.parsing import load_snapshot
    from app.views import graph_dot
    from app.views.graph import build_graph_view

    t0 = time.perf_counter()
    snapshot = load_snapshot(SNAPSHOT)
    parse_s = time.perf_counter() - t0
    step = snapshot.step(snapshot.steps[0].id)
    viewport = (step.view.viewport.width, step.view.viewport.height)
    repeats = 1 if args.smoke else 5
    views = {"overview": dict(expanded=(), framed=(), compact=True),
             "blocks12": dict(expanded=EXPANDED, framed=EXPANDED, compact=False)}
    out = {"snapshot": SNAPSHOT.name, "nodes": len(snapshot.node_map), "parse_s": parse_s, "repeats": repeats,
           "viewport": list(viewport), "expanded": list(EXPANDED)}
    for name, view in views.items():
        walls, dots = [], []
        for _ in range(repeats):
            graph_dot.cache_clear()
            t1 = time.perf_counter()
            g = build_graph_view(snapshot, view["expanded"], [], framed=view["framed"], viewport=viewport,
                                 compact=view["compact"])
            walls.append(time.perf_counter() - t1)
            dots.append(g.layout_seconds)
        figures[f"smol_layout_{name}_ms"] = median(walls) * 1e3
        figures[f"smol_dot_{name}_ms"] = median(dots) * 1e3
        out[name] = {"walls_ms": [w * 1e3 for w in walls], "dot_ms": [d * 1e3 for d in dots],
                     "nodes_drawn": len(g.nodes), "edges_drawn": len(g.edges)}
        log(f"smollm layout {name}: {figures[f'smol_layout_{name}_ms']:.0f} ms (dot "
            f"{figures[f'smol_dot_{name}_ms']:.0f} ms), {len(g.nodes)} boxes, {len(g.edges)} edges")
    graph_dot.cache_clear()
    details.setdefault("smollm", {})["layout"] = out


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
