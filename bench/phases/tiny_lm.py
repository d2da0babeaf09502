"""The tiny LM's engine in this process (issue 13): one token-level GRPO step, and the three
training paths of DeepSeek-R1 run end to end.

torch threads are set as the app sets them (`set_threads(Settings().torch_threads)`: the
TORCH_THREADS environment variable, 1 by default), so a figure here is what one request or one
path job costs inside the app, without the web layer.

- token step (a), "recorded": what the issue's target is about: `build_tiny_lm_grpo(policy, base,
  base, conventions)`, `record_model` of it on a sampled group (G = 8, T ≤ 24, every node's value
  kept) and `loss.backward()` (every node's gradient), exactly as `app/kinds/tiny_lm/engine/step.py`'s `_cached`
  does. The group, its rewards and the policy after the inner steps are prepared outside the
  timing; each seed is timed `token_repeats` times.
- token step (b), "whole": `run_token_step(TokenParams(seed=s))` with `_cached` cleared, i.e.
  also the sampling, the inner AdamW steps, the summaries, the three aggregations and the update.
- paths: `run_path(path, seed=0, scale=args.paths_scale)` for r1_zero, r1, distillation, in that
  order, so distillation takes R1's final model from the cache the r1 run filled (the student's
  own pre-training is still paid, once per process). A tiny warm-up path (scale 0.01, another
  seed) runs first: the first path of a process pays ~3 s of torch importing its compiler stack.
"""
from __future__ import annotations

import time

from bench.common import log, median

PATHS = ("r1_zero", "r1", "distillation", "r1_zero_dr_grpo", "distillation_cold")
# The bench's row ids: the path run, with which conventions, and whether R1's cached final model is
# dropped first (distillation_cold: a runner that never ran R1 runs it inside the distillation job).
RUNS = {"r1_zero": ("r1-zero", False, False), "r1": ("r1", False, False),
        "distillation": ("distillation", False, False), "r1_zero_dr_grpo": ("r1-zero", True, False),
        "distillation_cold": ("distillation", False, True)}
TOKEN_SEEDS = 8  # seeds per token-step measurement (full run)


def _p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))] if xs else float("nan")


def app_threads() -> int:
    """torch intra-op threads as the app sets them (app/web/factory.py: set_threads(settings.torch_threads))."""
    from app.engine.runtime.device import set_threads
    from app.web.settings import Settings

    n = Settings().torch_threads
    set_threads(n)
    return n  # stored as the figure tiny_lm_torch_threads: the rows name it


def token_step_phase(args, figures: dict, details: dict) -> None:
    import torch

    from app.engine.runtime.trace import record_model
    from app.kinds.tiny_lm.domain.arith_task import encode, make_prompts
    from app.kinds.tiny_lm.engine import step as tw
    from app.kinds.tiny_lm.engine.lm_sampling import sample_group
    from app.kinds.tiny_lm.engine.params import MAX_NEW_TOKENS, TokenParams
    from app.kinds.tiny_lm.engine.tiny_lm_grpo import STATEMENT_MODULES, build_tiny_lm_grpo

    threads = figures["tiny_lm_torch_threads"] = app_threads()
    device = args.resolved_device
    base = tw.base_model(device)
    seeds = range(args.token_seeds)

    # (a) the recorded step alone
    recorded, parts_ms, shapes = [], [], []
    for s in seeds:
        p = TokenParams(seed=s)
        prompt = make_prompts(1, p.seed)[0]
        group = sample_group(base, encode(prompt.text), p.group_size, MAX_NEW_TOKENS, p.seed)
        _, rewards = tw._rewards(p, prompt, group)
        rewards = rewards.to(device)
        policy, _ = tw._policy_after(base, group, rewards, p, p.inner_steps)
        shapes.append([int(group.ids.shape[0]), int(group.mask.shape[1])])
        inputs = (group.ids, group.mask, rewards, group.prompt_length)
        for r in range(args.token_repeats + 1):  # the first repeat of each seed is a warm-up
            t0 = time.perf_counter()
            grpo = build_tiny_lm_grpo(policy, base, base, p.conventions())
            t1 = time.perf_counter()
            rec = record_model(grpo, inputs, select_output=lambda out: out["loss"],
                               statement_modules=STATEMENT_MODULES)
            t2 = time.perf_counter()
            rec.result["loss"].backward()
            if device == "cuda":
                torch.cuda.synchronize()
            t3 = time.perf_counter()
            if r:
                recorded.append(t3 - t0)
                parts_ms.append((t1 - t0, t2 - t1, t3 - t2))
        nodes = len(rec.values)
        with_grad = sum(1 for t in rec.values.values() if t.requires_grad and t.grad is not None)
    figures["token_step_recorded_ms"] = median(recorded) * 1e3
    figures["token_step_recorded_p90_ms"] = _p90(recorded) * 1e3
    details["token_step"] = {
        "torch_threads": threads, "device": device, "seeds": list(seeds), "repeats_per_seed": args.token_repeats,
        "group_G_T": shapes, "nodes_recorded": nodes, "nodes_with_grad": with_grad,
        "recorded_runs": len(recorded),
        "recorded_parts_median_ms": {k: median([x[i] for x in parts_ms]) * 1e3
                                     for i, k in enumerate(("build", "record_forward", "backward"))},
    }
    log(f"token step, recorded: median {figures['token_step_recorded_ms']:.1f} ms, p90 "
        f"{figures['token_step_recorded_p90_ms']:.1f} ms ({len(recorded)} runs, {threads} torch thread(s))")

    # (b) the whole run_token_step, uncached
    whole = []
    tw._cached.cache_clear()
    tw.run_token_step(TokenParams(seed=10_000), device)  # warm-up
    for _ in range(args.token_repeats):
        for s in seeds:
            tw._cached.cache_clear()
            t0 = time.perf_counter()
            tw.run_token_step(TokenParams(seed=s), device)
            whole.append(time.perf_counter() - t0)
    tw._cached.cache_clear()
    figures["token_step_whole_ms"] = median(whole) * 1e3
    figures["token_step_whole_p90_ms"] = _p90(whole) * 1e3
    details["token_step"]["whole_runs"] = len(whole)
    log(f"token step, whole run_token_step: median {figures['token_step_whole_ms']:.1f} ms, p90 "
        f"{figures['token_step_whole_p90_ms']:.1f} ms ({len(whole)} runs)")


def paths_phase(args, figures: dict, details: dict) -> None:
    from app.kinds.tiny_lm.engine import lm_paths
    from app.kinds.tiny_lm.engine.lm_plans import CONVENTIONS, DR_GRPO

    threads = figures["tiny_lm_torch_threads"] = app_threads()
    device = args.resolved_device
    figures["path_scale"] = args.paths_scale
    lm_paths.run_path("r1_zero", seed=1, device=device, scale=0.01)  # warm-up: torch's compiler-stack import
    runs = {}
    for path in PATHS:
        run, dr, cold = RUNS[path]
        if cold:
            lm_paths._r1_final.clear()
        cached_teacher = run == "distillation" and bool(lm_paths._r1_final)
        w0, c0 = time.perf_counter(), time.process_time()
        result = lm_paths.run_path(run, seed=0, device=device, scale=args.paths_scale,
                                   conventions=DR_GRPO if dr else CONVENTIONS)
        final = result.final.stats
        runs[path] = {"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
                      "final_accuracy": final.accuracy, "final_mean_length": final.mean_length,
                      "stages": [s.id for s in result.stages]}
        if run == "distillation":
            runs[path]["r1_cached"] = cached_teacher
        figures[f"path_{path}_s"] = runs[path]["wall_s"]
        figures[f"path_{path}_cpu_s"] = runs[path]["cpu_s"]
        log(f"path {path} (scale {args.paths_scale:g}): {runs[path]['wall_s']:.1f} s wall, "
            f"{runs[path]['cpu_s']:.1f} s CPU" + (", R1 cached" if cached_teacher else ""))
    details["paths"] = {"torch_threads": threads, "device": device, "seed": 0, "scale": args.paths_scale,
                        "order": list(PATHS), **runs}
