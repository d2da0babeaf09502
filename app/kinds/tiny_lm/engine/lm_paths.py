"""DeepSeek-R1's three training paths on the tiny LM (arXiv 2501.12948 §2.2-2.4), run for real,
on the running-sums task (domain/sums_task.py: sums of 2 to 6 numbers, where working
step by step pays and the base sometimes does).

- r1-zero: GRPO straight from the shipped base checkpoint, rule rewards accuracy + format (§2.2).
- r1: cold-start SFT on a few dozen formatted, single-script, step-by-step examples; reasoning GRPO with
  accuracy + format + language consistency; rejection sampling from that model (right, formatted,
  single-script completions kept); SFT of the *base* on them; a final GRPO with every reward (§2.3).
- distillation: SFT of a smaller student (its own pre-trained start, shipped) on R1's final model's
  filtered outputs, no RL (§2.4).

Every GRPO update is `token_grpo_step` with the DeepSeekMath conventions and R1's β = 0.001 by
default (`CONVENTIONS`: k3 in the loss, clip 0.2, mean over each completion's tokens; a caller may
pass others, e.g. Dr. GRPO's, for every GRPO stage of the path), AdamW, G = 8
completions of 8 prompts per update, μ = 1; the KL term's reference is the model the stage starts
from (a point's kl_to_reference is always measured against the base). Training runs in float32
(the checkpoint is float64): faster on a CPU, and the curves are statistics of samples anyway.
Every measurement (`PathPoint`) samples the same held-out prompts with the same seed, so two
points differ by the model only. Deterministic for (path, seed, device, scale, conventions): every draw comes
from a torch.Generator or random.Random seeded from those.

Seconds on the shared 2-core development CPU with one torch thread (the app's TORCH_THREADS=1), on
the sums task: r1-zero 17-22 s, r1 29-36 s, distillation 8.5-10 s when R1 ran in this process for
the same seed, device, scale and conventions (cached), R1's time more when it must run R1 first.
The first path run in a process pays ≈ 3 s more: torch imports its compiler stack when the first
optimizer is built.
"""
from __future__ import annotations

import copy
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.domain.training_paths import PATH_IDS, canonical_path_id
from app.engine.grpo.params import Conventions
from app.kinds.tiny_lm.domain.arith_task import encode
from app.kinds.tiny_lm.domain.sums_corpus import completion as corpus_completion
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
    StagePlan,
    derived_seed,
    prompt_sets,
    scaled,
)
from app.kinds.tiny_lm.engine.lm_sampling import sample_groups
from app.kinds.tiny_lm.engine.lm_stages import MAX_NEW, grpo_stage, rejection_sample, sft_stage
from app.kinds.tiny_lm.engine.sums_base import STUDENT_CHECKPOINT
from app.kinds.tiny_lm.engine.sums_measure import Stats, by_difficulty, score, stats
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM

PATH_TITLES: dict[str, str] = {  # keyed by the shared ids (app/domain/training_paths.py)
    "r1-zero": "R1-Zero: RL straight from the base",
    "r1": "R1: cold start, reasoning RL, rejection sampling, SFT, RL again",
    "distillation": "Distillation: a smaller student fine-tuned on R1's outputs",
}
Progress = Callable[[str, int, int, int], None]  # (stage_id, step_in_stage, steps_done_in_path, total_steps_in_path)


@dataclass(frozen=True)
class PathPoint:
    """One evaluation on the fixed held-out prompts of the seed, EVAL_SAMPLES samples each at temperature 1,
    over all of them (`stats`) and per number of operands (`by_difficulty`, (2, stats) … (6, stats)).
    mean_length: completion tokens, <end> included; _correct / _incorrect: of the right / wrong ones.
    stepwise_share: completions that write at least one running-sum step; recheck_share: that recompute one.
    entropy: mean over sampled completion tokens of the policy's exact entropy (nats).
    kl_to_reference: mean over sampled completion tokens of the exact KL(π || π_ref) over the vocabulary
    (not k3); π_ref is the shipped base checkpoint, for the distillation student its own start."""
    stage: str
    step: int
    stats: Stats
    by_difficulty: tuple[tuple[int, Stats], ...]


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
    # One hard held-out prompt and SHOWCASE_SAMPLES completions of it by the path's first and last model.
    showcase: tuple[str, tuple[str, ...], tuple[str, ...]] = ("", (), ())
    conventions: dict = field(default_factory=dict)  # the GRPO stages' conventions, every field


# Per-process memos of immutable data, not an app's state: the shipped checkpoints as read onto a device
# (keyed by it), identical whichever app asks and never trained in place (runs copy them); kept so two apps
# of one process read each file once. An app's own state is its AppContext's (app/web/context.py).
_lock = threading.Lock()
_base: dict[str, TinyLM] = {}
_students: dict[str, TinyLM] = {}
_r1_final: OrderedDict[tuple[int, str, float, str], TinyLM] = OrderedDict()
SHOWCASE_SAMPLES = 4
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
                 parent: _Run | None = None, conventions: Conventions = CONVENTIONS):
        self.path, self.seed, self.device, self.scale, self.conventions = path, seed, device, scale, conventions
        self.progress, self.total, self.done, self.parent = progress, total, 0, parent
        self.held_out, self.pool = prompt_sets(seed)
        self.stages: list[StageResult] = []
        self.early: tuple[str, ...] = ()

    def tick(self, stage_id: str, step: int) -> None:
        if self.parent is not None:  # a teacher run inside distillation counts in the student's path
            self.parent.tick(stage_id, step)
            return
        if step > 0:
            self.done += 1
        if self.progress is not None:
            self.progress(stage_id, step, self.done, self.total)

    def point(self, model: TinyLM, reference: TinyLM, stage: str, step: int) -> PathPoint:
        if not self.early and self.parent is None:
            self.early = self.show(model)
        rows = score(model, reference, self.held_out, EVAL_SAMPLES, MAX_NEW, derived_seed(self.seed, "eval-samples"))
        return PathPoint(stage, step, stats(rows), tuple(by_difficulty(rows).items()))

    def show(self, model: TinyLM) -> tuple[str, ...]:
        """SHOWCASE_SAMPLES completions of the showcase prompt, with the same seed for every model."""
        (bucket,) = sample_groups(model, [encode(self.showcase.text)], SHOWCASE_SAMPLES, MAX_NEW,
                                  derived_seed(self.seed, "showcase"))
        return tuple(bucket.group.completions)

    @property
    def showcase(self):
        return next(p for p in self.held_out if p.difficulty == max(q.difficulty for q in self.held_out))

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
            grpo_stage(model, reference, self.pool, replace(GRPO_RECIPES[plan.id], steps=steps), self.conventions,
                       seed, on_step)
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
                          tuple((p.text, examples[i]) for i, p in enumerate(shown)), time.perf_counter() - began,
                          (self.showcase.text, self.early, self.show(model)), self.conventions.model_dump())


def _steps(plans: tuple[StagePlan, ...], scale: float) -> int:
    return sum(scaled(p.steps, scale) for p in plans)


def _run_r1_zero(run: _Run, base: TinyLM) -> TinyLM:
    policy = copy.deepcopy(base)
    run.train(R1_ZERO[0], policy, base, base)
    return policy


def _run_r1(run: _Run, base: TinyLM, prefix: str = "") -> TinyLM:
    cold, rl, rs, sft, final_rl = R1
    rng = random.Random(derived_seed(run.seed, "r1", "cold-start-data"))
    cold_texts = [(p.text, corpus_completion(p, "stepwise", rng)) for p in run.pool[-COLD_START_EXAMPLES:]]
    policy = copy.deepcopy(base)
    run.train(cold, policy, base, base, cold_texts, prefix)
    run.train(rl, policy, copy.deepcopy(policy), base, prefix=prefix)
    kept = run.curate(rs, policy, base, prefix)
    policy = copy.deepcopy(base)
    run.train(sft, policy, base, base, kept, prefix)
    run.train(final_rl, policy, copy.deepcopy(policy), base, prefix=prefix)
    return policy


def student_start(device: str = "cpu") -> TinyLM:
    """The distillation student's own start: the shipped student checkpoint (a smaller model
    pre-trained on the base's corpus with its recipe) in float32, loaded once per process and device."""
    with _lock:
        if device not in _students:
            _students[device] = load_base(STUDENT_CHECKPOINT).float().to(device).eval()
        return _students[device]


def run_path(path: str, seed: int = 0, progress: Progress | None = None, device: str = "cpu",
             scale: float = 1.0, conventions: Conventions = CONVENTIONS) -> PathResult:
    """Run one training path. `scale` multiplies every stage's steps (at least one each): 1.0 is the
    walkthrough's run, a small scale a quick check. Distillation needs R1's final model: taken from
    this process's cache when R1 ran for the same (seed, device, scale, conventions), otherwise R1 runs first (its
    stages then report progress as "r1/<stage>")."""
    path = canonical_path_id(path)
    if path not in PLANS:
        raise ValueError(f"unknown path {path!r}: choose one of {', '.join(PATH_IDS)}")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    began = time.perf_counter()
    base = base_model(device)
    key = (seed, device, scale, conventions.model_dump_json())
    total = _steps(PLANS[path], scale)
    with _lock:  # what is cached now is what this run uses: the total counts the rest
        teacher = _r1_final.get(key)
    if path == "distillation" and teacher is None:
        total += _steps(R1, scale)
    run = _Run(path, seed, device, scale, progress, total, conventions=conventions)
    if path == "r1-zero":
        model = _run_r1_zero(run, base)
        return run.result(model, base, began)
    if path == "r1":
        model = _run_r1(run, base)
        _remember(key, model)
        return run.result(model, base, began)
    if teacher is None:
        teacher = _run_r1(_Run("r1", seed, device, scale, None, 0, parent=run, conventions=conventions), base,
                          prefix="r1/")
        _remember(key, teacher)
    start = student_start(device)
    data_plan, sft_plan = DISTILLATION
    run.early = run.show(start)  # the student's own start, not the teacher measured first
    kept = run.curate(data_plan, teacher, base)
    student = copy.deepcopy(start)
    run.train(sft_plan, student, start, start, kept)
    return run.result(student, start, began)


def _remember(key: tuple[int, str, float, str], model: TinyLM) -> None:
    with _lock:
        _r1_final[key] = model
        _r1_final.move_to_end(key)
        while len(_r1_final) > R1_CACHE_SIZE:
            _r1_final.popitem(last=False)
