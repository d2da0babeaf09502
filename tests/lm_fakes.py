"""Training-path results built by hand (issue 22's length view): the numbers a test wants, without
running a path. A path's points go linearly from `start` to `end`; each difficulty gets the same
numbers, the hardest (6) shifted by `hard_shift` on its step-by-step share."""
from __future__ import annotations

from dataclasses import replace

from app.engine.grpo.params import Conventions
from app.kinds.tiny_lm.engine.lm_paths import PathPoint, PathResult, StageResult
from app.kinds.tiny_lm.engine.sums_measure import Stats

SIZES = (2, 3, 4, 5, 6)
SHOWCASE = "3+5+9+2+7+4="  # 30
EARLY = ("<think>28</think><answer>28</answer><end>",
         "<think>3+5=8 8+9=17 17+2=19 19+7=26 26+4=30</think><answer>30</answer><end>",
         "<think>30</think><answer>30</answer><end>",
         "31<end>")
LATE = ("<think>3+5=8 8+9=17 17+2=19 19+7=26 26+4=30</think><answer>30</answer><end>",
        "<think>3+5=8 8+9=18 8+9=17 17+2=19 19+7=26 26+4=30</think><answer>30</answer><end>",
        "<think>3+5=8 8+9=17 17+2=19 19+7=26 26+4=31</think><answer>31</answer><end>",
        "<think>3+5=8 8+9=17 17+2=19 19+7=26 26+4=30</think><answer>30</answer><end>")

BASE = {"accuracy": 0.31, "format_rate": 0.85, "mixed_rate": 0.07, "mean_length": 16.7, "mean_length_correct": 14.0,
        "mean_length_incorrect": 17.5, "stepwise_share": 0.25, "recheck_share": 0.02, "accuracy_stepwise": 0.8,
        "accuracy_guess": 0.3, "entropy": 0.4, "kl_to_reference": 0.0}
GROWN = {"accuracy": 0.62, "format_rate": 0.99, "mixed_rate": 0.09, "mean_length": 27.9, "mean_length_correct": 24.2,
         "mean_length_incorrect": 31.0, "stepwise_share": 0.99, "recheck_share": 0.05, "accuracy_stepwise": 0.63,
         "accuracy_guess": 0.2, "entropy": 0.2, "kl_to_reference": 0.3}


def stats(values: dict) -> Stats:
    return Stats(completions=480, **values)


def _mix(a: dict, b: dict, t: float) -> dict:
    return {k: (None if a[k] is None or b[k] is None else a[k] + t * (b[k] - a[k])) for k in a}


def point(stage: str, step: int, values: dict, hard_shift: float = 0.0) -> PathPoint:
    by = tuple((n, stats(values if n != 6 else {**values, "stepwise_share":
                                                  min(1.0, max(0.0, values["stepwise_share"] + hard_shift))}))
               for n in SIZES)
    return PathPoint(stage, step, stats(values), by)


def fake_result(path: str = "r1-zero", start: dict = BASE, end: dict = GROWN, steps: int = 60, every: int = 10,
                seed: int = 3, conventions: Conventions | None = None, hard_shift: float = 0.0,
                pace=lambda t: t) -> PathResult:
    """One GRPO stage of `steps` steps (R1-Zero's shape); for r1 and distillation their stage shapes with
    the same start and end, so the view's choices per path are exercised. `pace` maps the fraction of a
    stage done to the fraction of the way from start to end (linear by default)."""
    conv = (conventions or Conventions(beta=0.001, max_length=56)).model_dump()

    def stage(sid: str, title: str, kind: str, n: int, lo: float, hi: float, every_: int) -> StageResult:
        marks = sorted({0, *range(every_, n + 1, every_), n}) if n else [0]
        return StageResult(sid, title, kind, f"{title}.", tuple(
            point(sid, k, _mix(start, end, lo + (hi - lo) * pace(k / n if n else 0.0)), hard_shift) for k in marks))

    if path == "r1-zero":
        stages = (stage("rl", "GRPO from the base", "grpo", steps, 0.0, 1.0, every),)
    elif path == "r1":
        stages = (stage("cold_start", "Cold-start SFT", "sft", 30, 0.0, 0.4, 10),
                  stage("reasoning_rl", "Reasoning-oriented RL", "grpo", 40, 0.4, 0.8, 10),
                  stage("rejection_sampling", "Rejection sampling", "rejection_sampling", 0, 0.8, 0.8, 1),
                  stage("sft", "SFT of the base", "sft", 80, 0.0, 0.9, 20),
                  stage("final_rl", "RL for all scenarios", "grpo", 30, 0.9, 1.0, 10))
    else:
        teacher = StageResult("teacher_data", "R1's outputs", "rejection_sampling", "R1's outputs.",
                              (point("teacher_data", 0, {**end, "accuracy": 0.95}),))
        stages = (teacher, stage("student_sft", "SFT of the student", "sft", 120, 0.0, 1.0, 30))
    final = stages[-1].points[-1]
    return PathResult(path, seed, stages, final, (("3+5=", "<think>3+5=8</think><answer>8</answer><end>"),),
                      12.3, (SHOWCASE, EARLY, LATE), conv)


def with_final(result: PathResult, **changes) -> PathResult:
    """The result with its last point's overall numbers changed."""
    last = result.stages[-1]
    end = replace(last.points[-1], stats=replace(last.points[-1].stats, **changes))
    stages = (*result.stages[:-1], replace(last, points=(*last.points[:-1], end)))
    return replace(result, stages=stages, final=end)
