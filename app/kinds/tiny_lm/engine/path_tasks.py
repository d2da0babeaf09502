"""The tiny-LM training paths as jobs (app/engine/jobs): 10–25 s each is too long for a
request, so a page submits the run and polls its row. A runner computes it once for every
worker and replica, and the result stays in the store until an operator deletes it."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar

from app.domain.training_paths import PATH_IDS
from app.engine.grpo.params import Conventions
from app.engine.jobs.tasks import Job, JobParams, Progress
from app.kinds.tiny_lm.engine.lm_paths import PathPoint, PathResult, StageResult, run_path
from app.kinds.tiny_lm.engine.lm_plans import CONVENTIONS
from app.kinds.tiny_lm.engine.sums_measure import Stats

TASK = "lm_path"
TYPES = (PathResult, StageResult, PathPoint, Stats)
SCALE_RANGE = (0.01, 1.0)  # the walkthrough runs 1.0; a small scale is a quick check (tests, a demo)
# What a URL without `preset` starts from: the paths' own conventions (R1's β on DeepSeekMath's),
# and Dr. GRPO's constant normaliser at the completions' token budget.
DEFAULT_CONVENTIONS = {"beta": CONVENTIONS.beta, "max_length": CONVENTIONS.max_length}


class LmPathJob(JobParams):
    """A path's run: the path, its seed, the device, `scale` (every stage's steps multiplied) and the conventions
    of its GRPO stages (with max_length: Dr. GRPO's constant normaliser)."""
    task: ClassVar[str] = TASK
    path: str
    seed: int
    device: str
    scale: float = 1.0
    conventions: Conventions


def path_params(path: str, seed: int, device: str, scale: float = 1.0,
                conventions: Conventions = CONVENTIONS) -> LmPathJob:
    if path not in PATH_IDS:
        raise KeyError(path)
    if "max_length" not in conventions.model_fields_set:  # a preset never sets it: the token budget
        conventions = conventions.model_copy(update={"max_length": CONVENTIONS.max_length})
    # the conventions as stored (every field written): what a runner rebuilds is what was asked
    return LmPathJob(path=path, seed=int(seed), device=device, scale=float(scale),
                     conventions=Conventions(**conventions.model_dump(mode="json")))


def path_job(path: str, seed: int, device: str, scale: float = 1.0, conventions: Conventions = CONVENTIONS) -> Job:
    return path_params(path, seed, device, scale, conventions).job()


def run_task(params: LmPathJob, progress: Progress) -> PathResult:
    return run_path(params.path, params.seed, progress, params.device, params.scale, params.conventions)


def title(params: LmPathJob) -> str:
    scale = "" if params.scale == 1.0 else f" ×{params.scale:g} steps"
    return f"{params.path} seed {params.seed}{scale} {params.conventions.preset} ({params.device})"


CURVES = tuple(name for name in Stats.__dataclass_fields__ if name != "completions")


def _points(result: PathResult) -> list[tuple[int, str, PathPoint]]:
    """Every evaluation point with its step counted along the whole path (a stage starts where the one
    before it ended; a rejection-sampling stage takes no optimiser step)."""
    out, offset = [], 0
    for stage in result.stages:
        out += [(offset + p.step, stage.id, p) for p in stage.points]
        offset += max((p.step for p in stage.points), default=0)
    return out


def _curve(points: list[tuple[int, str, Stats]], metric: str) -> list[dict[str, Any]]:
    return [{"step": step, "stage": stage, "value": getattr(s, metric)} for step, stage, s in points]


def payload(params: LmPathJob, result: PathResult) -> dict[str, Any]:
    """The paths API's `result`: `curves` {metric: [{step, stage, value}]} over the whole path, the same
    per number of operands in `by_difficulty` {"2": {metric: …}, …}, the stages, the final point, the
    example completions and the showcase prompt's early and late ones."""
    points = _points(result)
    overall = [(step, stage, p.stats) for step, stage, p in points]
    sizes = [n for n, _ in points[0][2].by_difficulty]
    per = {n: [(step, stage, dict(p.by_difficulty)[n]) for step, stage, p in points] for n in sizes}
    starts = {stage: step for step, stage, _ in reversed(points)}
    prompt, early, late = result.showcase
    return {
        "path": result.path, "seed": result.seed, "seconds": result.seconds, "conventions": result.conventions,
        "stages": [{"id": s.id, "title": s.title, "kind": s.kind, "description": s.description,
                    "start_step": starts[s.id]} for s in result.stages],
        "final": asdict(result.final.stats),
        "curves": {m: _curve(overall, m) for m in CURVES},
        "by_difficulty": {str(n): {m: _curve(per[n], m) for m in CURVES} for n in sizes},
        "examples": [{"prompt": p, "completion": c} for p, c in result.examples],
        "showcase": {"prompt": prompt, "early": list(early), "late": list(late)},
    }
