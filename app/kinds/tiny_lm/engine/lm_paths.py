"""DeepSeek-R1's three training paths on the tiny LM (issue 13; arXiv 2501.12948 §2.2-2.4), run for real.

- r1-zero: GRPO straight from the shipped base checkpoint, rule rewards accuracy + format (§2.2).
- r1: cold-start SFT on a few dozen formatted, single-script examples; reasoning GRPO with
  accuracy + format + language consistency; rejection sampling from that model (right, formatted,
  single-script completions kept); SFT of the *base* on them; a final GRPO with every reward (§2.3).
- distillation: SFT of a smaller student on R1's final model's filtered outputs, no RL (§2.4).

Every GRPO update is `token_grpo_step` with the DeepSeekMath conventions and R1's β = 0.001
(`CONVENTIONS`: k3 in the loss, clip 0.2, mean over each completion's tokens), AdamW, G = 8
completions of 8 prompts per update, μ = 1; the KL term's reference is the model the stage starts
from (PathPoint.kl_to_reference is always measured against the base). Training runs in float32
(the checkpoint is float64): faster on a CPU, and the curves are statistics of samples anyway.
Every measurement (`PathPoint`) samples the same held-out prompts with the same seed, so two
points differ by the model only. Deterministic for (path, seed, device, scale): every draw comes
from a torch.Generator or random.Random seeded from those.

Seconds on the shared 2-core development CPU with one torch thread (the app's TORCH_THREADS=1;
with two threads on a busy machine r1_zero took 40 s instead of 10): r1_zero ≈ 10 s, r1 ≈ 18 s,
distillation ≈ 3 s when R1 ran in this process for the same seed and device (cached; +3 s the
first time, to pre-train the student), ≈ 22 s when it must run R1 first. The first path run in a
process pays ≈ 3 s more: torch imports its compiler stack when the first optimizer is built.
"""
from __future__ import annotations

import copy
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from app.domain.training_paths import PATH_IDS, canonical_path_id
from app.kinds.tiny_lm.domain.arith_corpus import completion as corpus_completion
from app.kinds.tiny_lm.domain.arith_task import encode
from app.kinds.tiny_lm.engine.base_training import load_base
from app.kinds.tiny_lm.engine.lm_plans import (
    BASE_CHECKPOINT,
    COLD_START_EXAMPLES,
    CONVENTIONS,
    DISTILLATION,
    EVAL_SAMPLES,
    GRPO_RECIPES,
    PLANS,
    R1,
    R1_ZERO,
    REJECTION_PROMPTS,
    REJECTION_SAMPLES,
    SFT_RECIPES,
    STUDENT,
    STUDENT_PRETRAIN_STEPS,
    StagePlan,
    derived_seed,
    prompt_sets,
    scaled,
)
from app.kinds.tiny_lm.engine.lm_rollout import measure, sample_groups
from app.kinds.tiny_lm.engine.lm_stages import MAX_NEW, grpo_stage, pretrain_student, rejection_sample, sft_stage
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM

PATH_TITLES: dict[str, str] = {  # keyed by the shared ids (app/domain/training_paths.py)
    "r1-zero": "R1-Zero: RL straight from the base",
    "r1": "R1: cold start, reasoning RL, rejection sampling, SFT, RL again",
    "distillation": "Distillation: a smaller student fine-tuned on R1's outputs",
}
Progress = Callable[[str, int, int, int], None]  # (stage_id, step_in_stage, steps_done_in_path, total_steps_in_path)


@dataclass(frozen=True)
class PathPoint:
    """One evaluation on the fixed held-out prompts of the seed, EVAL_SAMPLES samples each at temperature 1.
    entropy: mean over sampled completion tokens of the policy's exact entropy (nats).
    kl_to_reference: mean over sampled completion tokens of the exact KL(π || π_ref) over the vocabulary
    (not k3); π_ref is the shipped base checkpoint, for the distillation student its own start."""
    stage: str
    step: int
    accuracy: float
    format_rate: float
    mixed_rate: float
    mean_length: float
    entropy: float
    kl_to_reference: float


@dataclass(frozen=True)
class StageResult:
    id: str
    title: str
    kind: str  # "grpo" | "sft" | "rejection_sampling"
    description: str
    points: tuple[PathPoint, ...]


@dataclass(frozen=True)
class PathResult:
    path: str
    seed: int
    stages: tuple[StageResult, ...]
    final: PathPoint
    examples: tuple[tuple[str, str], ...]
    seconds: float


_lock = threading.Lock()
_base: dict[str, TinyLM] = {}
_students: dict[tuple[str, int], TinyLM] = {}
_r1_final: OrderedDict[tuple[int, str, float], TinyLM] = OrderedDict()
R1_CACHE_SIZE = 8


def base_model(device: str) -> TinyLM:
    """The shipped base checkpoint in float32 on `device`, loaded once per process (callers copy it)."""
    with _lock:
        if device not in _base:
            _base[device] = load_base(BASE_CHECKPOINT).float().to(device).eval()
        return _base[device]


class _Run:
    """One run_path call: the progress count, the evaluation set and the stage results."""

    def __init__(self, path: str, seed: int, device: str, scale: float, progress: Progress | None, total: int,
                 parent: _Run | None = None):
        self.path, self.seed, self.device, self.scale = path, seed, device, scale
        self.progress, self.total, self.done, self.parent = progress, total, 0, parent
        self.held_out, self.pool = prompt_sets(seed)
        self.stages: list[StageResult] = []

    def tick(self, stage_id: str, step: int) -> None:
        if self.parent is not None:  # a teacher run inside distillation counts in the student's path
            self.parent.tick(stage_id, step)
            return
        if step > 0:
            self.done += 1
        if self.progress is not None:
            self.progress(stage_id, step, self.done, self.total)

    def point(self, model: TinyLM, reference: TinyLM, stage: str, step: int) -> PathPoint:
        m = measure(model, reference, self.held_out, EVAL_SAMPLES, MAX_NEW, derived_seed(self.seed, "eval-samples"))
        return PathPoint(stage, step, m.accuracy, m.format_rate, m.mixed_rate, m.mean_length, m.entropy,
                         m.kl_to_reference)

    def train(self, plan: StagePlan, model: TinyLM, reference: TinyLM, kl_reference: TinyLM,
              texts: list[tuple[str, str]] | None = None, prefix: str = "") -> None:
        """Train `model` in place through one GRPO or SFT stage, measuring it as it goes."""
        steps = scaled(plan.steps, self.scale)
        every = scaled(plan.eval_every, self.scale) if plan.eval_every else steps
        stage_id = prefix + plan.id
        points = [self.point(model, kl_reference, plan.id, 0)]
        self.tick(stage_id, 0)

        def on_step(step: int) -> None:
            if step % every == 0 or step == steps:
                points.append(self.point(model, kl_reference, plan.id, step))
            self.tick(stage_id, step)

        seed = derived_seed(self.seed, self.path, plan.id)
        if plan.kind == "grpo":
            grpo_stage(model, reference, self.pool, replace(GRPO_RECIPES[plan.id], steps=steps), CONVENTIONS, seed,
                       on_step)
        else:
            sft_stage(model, texts or [], replace(SFT_RECIPES[plan.id], steps=steps), seed, on_step)
        self.stages.append(StageResult(plan.id, plan.title, plan.kind, plan.description, tuple(points)))

    def curate(self, plan: StagePlan, model: TinyLM, kl_reference: TinyLM, prefix: str = "") -> list[tuple[str, str]]:
        """A rejection-sampling stage: the kept texts; its one point measures the model sampled from,
        its description ends with how many completions were kept."""
        point = self.point(model, kl_reference, plan.id, 0)
        self.tick(prefix + plan.id, 0)
        prompts = self.pool[:REJECTION_PROMPTS]
        kept, sampled = rejection_sample(model, prompts, REJECTION_SAMPLES, scaled(plan.steps, self.scale),
                                         derived_seed(self.seed, self.path, plan.id),
                                         lambda step: self.tick(prefix + plan.id, step))
        description = f"{plan.description} Kept {len(kept):,} of {sampled:,}."
        self.stages.append(StageResult(plan.id, plan.title, plan.kind, description, (point,)))
        return kept

    def result(self, model: TinyLM, kl_reference: TinyLM, began: float) -> PathResult:
        final = self.stages[-1].points[-1]
        shown = self.held_out[:4]
        buckets = sample_groups(model, [encode(p.text) for p in shown], 1, MAX_NEW, derived_seed(self.seed, "show"))
        examples = {m: b.group.completions[j] for b in buckets for j, m in enumerate(b.members)}
        return PathResult(self.path, self.seed, tuple(self.stages), final,
                          tuple((p.text, examples[i]) for i, p in enumerate(shown)), time.perf_counter() - began)


def _steps(plans: tuple[StagePlan, ...], scale: float) -> int:
    return sum(scaled(p.steps, scale) for p in plans)


def _run_r1_zero(run: _Run, base: TinyLM) -> TinyLM:
    policy = copy.deepcopy(base)
    run.train(R1_ZERO[0], policy, base, base)
    return policy


def _run_r1(run: _Run, base: TinyLM, prefix: str = "") -> TinyLM:
    cold, rl, rs, sft, final_rl = R1
    rng = random.Random(derived_seed(run.seed, "r1", "cold-start-data"))
    cold_texts = [(p.text, corpus_completion(p, "correct", rng)) for p in run.pool[-COLD_START_EXAMPLES:]]
    policy = copy.deepcopy(base)
    run.train(cold, policy, base, base, cold_texts, prefix)
    run.train(rl, policy, copy.deepcopy(policy), base, prefix=prefix)
    kept = run.curate(rs, policy, base, prefix)
    policy = copy.deepcopy(base)
    run.train(sft, policy, base, base, kept, prefix)
    run.train(final_rl, policy, copy.deepcopy(policy), base, prefix=prefix)
    return policy


def student_start(device: str = "cpu", steps: int = STUDENT_PRETRAIN_STEPS) -> TinyLM:
    """The distillation student's own start: STUDENT pre-trained `steps` steps on the base corpus,
    with the base's recipe; the same for every seed, built once per process and device."""
    with _lock:
        cached = _students.get((device, steps))
    if cached is not None:
        return cached
    model = pretrain_student(STUDENT, steps, device, lambda step: None)
    with _lock:
        return _students.setdefault((device, steps), model)


def run_path(path: str, seed: int = 0, progress: Progress | None = None, device: str = "cpu",
             scale: float = 1.0) -> PathResult:
    """Run one training path. `scale` multiplies every stage's steps (at least one each): 1.0 is the
    walkthrough's run, a small scale a quick check. Distillation needs R1's final model: taken from
    this process's cache when R1 ran for the same (seed, device, scale), otherwise R1 runs first (its
    stages then report progress as "r1/<stage>", the student's pre-training as "student_base")."""
    path = canonical_path_id(path)
    if path not in PLANS:
        raise ValueError(f"unknown path {path!r}: choose one of {', '.join(PATH_IDS)}")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    began = time.perf_counter()
    base = base_model(device)
    key = (seed, device, scale)
    total = _steps(PLANS[path], scale)
    pretrain_steps = scaled(STUDENT_PRETRAIN_STEPS, scale)
    with _lock:  # what is cached now is what this run uses: the total counts the rest
        teacher = _r1_final.get(key)
        start = _students.get((device, pretrain_steps))
    if path == "distillation":
        total += (0 if teacher is not None else _steps(R1, scale)) + (0 if start is not None else pretrain_steps)
    run = _Run(path, seed, device, scale, progress, total)
    if path == "r1-zero":
        model = _run_r1_zero(run, base)
        return run.result(model, base, began)
    if path == "r1":
        model = _run_r1(run, base)
        _remember(key, model)
        return run.result(model, base, began)
    if teacher is None:
        teacher = _run_r1(_Run("r1", seed, device, scale, None, 0, parent=run), base, prefix="r1/")
        _remember(key, teacher)
    if start is None:  # pre-trained here, so its steps are the ones the total counted
        built = pretrain_student(STUDENT, pretrain_steps, device, lambda step: run.tick("student_base", step))
        with _lock:
            start = _students.setdefault((device, pretrain_steps), built)
    data_plan, sft_plan = DISTILLATION
    kept = run.curate(data_plan, teacher, base)
    student = copy.deepcopy(start)
    run.train(sft_plan, student, start, start, kept)
    return run.result(student, start, began)


def _remember(key: tuple[int, str, float], model: TinyLM) -> None:
    with _lock:
        _r1_final[key] = model
        _r1_final.move_to_end(key)
        while len(_r1_final) > R1_CACHE_SIZE:
            _r1_final.popitem(last=False)
