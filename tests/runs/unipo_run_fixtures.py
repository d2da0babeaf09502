"""Whole UNIPO canonical files for the run tests (test_unipo_runs.py): many entries, a few holding prompts.

Each entry holding prompts is the step tests/fixtures/make_unipo_fixture.py builds, from a seed of its own and at
its own step (its metrics computed in float64 from its tokens, so every check of its record passes); the other
entries log metrics only, drawn from a seeded generator, some of them null (not logged at that step).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from unipo_fixture import fixture_script

HEADER = fixture_script().HEADER


def prompt_entry(step: int, seed: int) -> dict:
    script = fixture_script()
    script.SEED, script.STEP = seed, step
    return script.build()["entries"][1]


def metrics_entry(step: int, rng: np.random.Generator) -> dict:
    metrics = {"policy_objective": float(rng.normal(0, 0.05)), "reward": float(rng.uniform(0, 1)),
               "kl": float(abs(rng.normal(0.02, 0.01))), "entropy": float(rng.uniform(0.5, 3)),
               "clip_fraction": float(rng.uniform(0, 0.01)), "grad_norm": float(rng.gamma(2, 0.3)),
               "response_length": int(rng.integers(5, 400))}
    if step % 5 == 3:
        metrics["kl"] = None  # not logged at this step
    return {"step": step, "is_first_step_after_rollout_phase": step % 2 == 0, "metrics": metrics}


def unipo_run(steps: int = 30, recorded: tuple[int, ...] = (4, 11, 23), seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    entries = [prompt_entry(s, 100 + s) if s in recorded else metrics_entry(s, rng) for s in range(steps)]
    return {"header": json.loads(json.dumps(HEADER)), "entries": entries}


def write(path: Path, doc: dict, header_last: bool = False) -> Path:
    """`doc` as UNIPO writes it; `header_last` puts the header after the entries (UNIPO fixes no key order)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if header_last:
        doc = {k: doc[k] for k in sorted(doc, key=lambda k: k == "header")}
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def expected_metrics(path: Path) -> dict[str, dict[int, float]]:
    """Every metric of the file at its steps, by json.load: what the opened run must hold, independently read."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[int, float]] = {}
    for entry in doc["entries"]:
        for name, value in entry.get("metrics", {}).items():
            if value is not None:
                out.setdefault(name, {})[entry["step"]] = float(value)
    return out


def with_prompts(path: Path) -> list[tuple[int, dict]]:
    """(step, entry) of each entry holding prompts, by json.load."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [(e["step"], e) for e in doc["entries"] if e.get("prompts") is not None]
