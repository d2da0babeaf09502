"""The tiny-LM training paths as jobs (issue 21; app/engine/jobs): 10–25 s each is too long for a
request, so a page submits the run and polls its row. A runner computes it once for every
worker and replica, and the result stays in the store until an operator deletes it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.training_paths import PATH_IDS
from app.engine.jobs.tasks import Progress
from app.kinds.tiny_lm.engine.lm_paths import PathPoint, PathResult, StageResult, run_path

TASK = "lm_path"
TYPES = (PathResult, StageResult, PathPoint)
SCALE_RANGE = (0.01, 1.0)  # the walkthrough runs 1.0; a small scale is a quick check (tests, a demo)


def path_params(path: str, seed: int, device: str, scale: float = 1.0) -> dict[str, Any]:
    if path not in PATH_IDS:
        raise KeyError(path)
    return {"path": path, "seed": int(seed), "device": device, "scale": float(scale)}


def run_task(params: Mapping[str, Any], progress: Progress) -> PathResult:
    return run_path(str(params["path"]), int(params["seed"]), progress, str(params["device"]),
                    float(params["scale"]))


def title(params: Mapping[str, Any]) -> str:
    scale = "" if float(params["scale"]) == 1.0 else f" ×{params['scale']:g} steps"
    return f"{params['path']} seed {params['seed']}{scale} ({params['device']})"
