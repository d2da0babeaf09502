"""DeepSeek-R1's three training paths on the tiny LM (app/engine/lm_paths.py): the API's shapes,
determinism, progress, and the directions the paper reports, on five seeds.

The full paths run once per seed for the whole module (≈ 30 s a seed on two cores); the quick
checks use `scale`, which shortens every stage."""
import dataclasses
from functools import cache

import pytest
import torch

from app.kinds.tiny_lm.domain.arith_task import encode, make_prompts
from app.kinds.tiny_lm.engine import lm_paths
from app.kinds.tiny_lm.engine.base_training import load_base
from app.kinds.tiny_lm.engine.lm_paths import PATH_IDS, PATH_TITLES, PathResult, run_path
from app.kinds.tiny_lm.engine.lm_plans import BASE_CHECKPOINT, STUDENT
from app.kinds.tiny_lm.engine.lm_rollout import sample_groups
from app.kinds.tiny_lm.engine.lm_sampling import sample_group
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM

SEEDS = (0, 1, 2, 3, 4)
QUICK = 0.1  # every stage at a tenth of its steps
# Margins of the directions; the measured gaps (seeds 0-4) are several times larger.
ACCURACY_GAIN = 0.10  # R1-Zero: final accuracy − start accuracy
MIXING_GAP = 0.10  # R1-Zero's final mixed rate − R1's
STUDENT_GAIN = 0.10  # the student's final accuracy − its own start
TEACHER_GAP = 0.05  # R1's final accuracy − the student's final


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The app's setting (TORCH_THREADS=1): on two shared cores more threads only slow these down."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@cache
def full(path: str, seed: int) -> PathResult:
    if path == "distillation":
        full("r1", seed)  # R1 first, so distillation takes its final model from the cache
    return run_path(path, seed)


def without_time(result: PathResult) -> PathResult:
    return dataclasses.replace(result, seconds=0.0)


def test_paths_and_titles():
    assert PATH_IDS == ("r1-zero", "r1", "distillation")
    assert set(PATH_TITLES) == set(PATH_IDS) and all(PATH_TITLES.values())
    with pytest.raises(ValueError, match="unknown path"):
        run_path("r2", scale=QUICK)


def test_the_student_is_smaller():
    base = sum(p.numel() for p in load_base(BASE_CHECKPOINT).parameters())
    student = sum(p.numel() for p in TinyLM(STUDENT).parameters())
    assert (student, base) == (15_584, 105_728)


def test_batched_sampling_draws_what_sample_group_draws():
    model = load_base(BASE_CHECKPOINT)
    for i, prompt in enumerate(make_prompts(6, seed=3)):
        one = sample_group(model, encode(prompt.text), 8, 24, seed=i)
        (bucket,) = sample_groups(model, [encode(prompt.text)], 8, 24, seed=i)
        assert torch.equal(one.ids, bucket.group.ids) and torch.equal(one.mask, bucket.group.mask)


@pytest.mark.parametrize("path", PATH_IDS)
def test_shapes_of_a_full_run(path):
    result = full(path, 0)
    kinds = {"r1-zero": ("grpo",), "r1": ("sft", "grpo", "rejection_sampling", "sft", "grpo"),
             "distillation": ("rejection_sampling", "sft")}[path]
    assert (result.path, result.seed) == (path, 0)
    assert tuple(s.kind for s in result.stages) == kinds
    assert len({s.id for s in result.stages}) == len(kinds)
    for stage in result.stages:
        assert stage.title and stage.description
        assert stage.points[0].step == 0 and all(p.stage == stage.id for p in stage.points)
        assert [p.step for p in stage.points] == sorted({p.step for p in stage.points})
        for p in stage.points:
            assert 0 <= p.mixed_rate <= 1 and 0 <= p.format_rate <= 1 and 0 <= p.accuracy <= 1
            assert 1 <= p.mean_length <= 24 and p.entropy >= 0 and p.kl_to_reference >= -1e-9
        if stage.kind == "rejection_sampling":
            assert len(stage.points) == 1
        else:
            assert len(stage.points) >= 3
    assert result.final == result.stages[-1].points[-1]
    assert len(result.examples) == 4 and all(prompt.endswith("=") for prompt, _ in result.examples)
    assert result.seconds > 0


@pytest.mark.parametrize("path", ["r1-zero", "r1"])
def test_deterministic(path):
    assert without_time(run_path(path, 5, scale=QUICK)) == without_time(run_path(path, 5, scale=QUICK))


def test_distillation_alone_runs_r1_first_and_reports_its_progress():
    calls = []
    alone = run_path("distillation", 6, progress=lambda *c: calls.append(c), scale=QUICK)
    teacher_stages = {c[0] for c in calls if c[0].startswith("r1/")}
    assert teacher_stages == {"r1/cold_start", "r1/reasoning_rl", "r1/rejection_sampling", "r1/sft", "r1/final_rl"}
    assert {c[0] for c in calls} - teacher_stages <= {"student_base", "teacher_data", "student_sft"}
    done = [c[2] for c in calls]
    assert done == sorted(done) and done[-1] == calls[-1][3] and len({c[3] for c in calls}) == 1
    # Now R1's final model is cached: the same result, from fewer steps.
    again = []
    assert without_time(run_path("distillation", 6, progress=lambda *c: again.append(c), scale=QUICK)) == \
        without_time(alone)
    assert again[-1][2] == again[-1][3] < calls[-1][3]
    assert not any(c[0].startswith("r1/") for c in again)


@pytest.mark.parametrize("path", ["r1-zero", "r1"])
def test_progress_is_monotone_and_ends_at_the_total(path):
    calls = []
    result = run_path(path, 5, progress=lambda *c: calls.append(c), scale=QUICK)
    stage_ids = [s.id for s in result.stages]
    assert [c[0] for c in calls] == sorted((c[0] for c in calls), key=stage_ids.index)
    assert len({c[3] for c in calls}) == 1
    done = [c[2] for c in calls]
    assert done == sorted(done) and done[0] == 0 and done[-1] == calls[-1][3]
    for stage_id in stage_ids:
        steps = [c[1] for c in calls if c[0] == stage_id]
        assert steps == list(range(len(steps)))


def test_r1_cache_is_bounded():
    assert len(lm_paths._r1_final) <= lm_paths.R1_CACHE_SIZE


@pytest.mark.parametrize("seed", SEEDS)
def test_directions(seed):
    """R1-Zero learns to answer; R1 stays in one script where R1-Zero mixes; the distilled student
    improves over its own start but stays below its teacher."""
    zero, r1, student = full("r1-zero", seed), full("r1", seed), full("distillation", seed)
    start = zero.stages[0].points[0]
    assert zero.final.accuracy >= start.accuracy + ACCURACY_GAIN, (start, zero.final)
    assert r1.final.mixed_rate <= zero.final.mixed_rate - MIXING_GAP, (r1.final, zero.final)
    own_start = student.stages[-1].points[0]
    assert student.final.accuracy >= own_start.accuracy + STUDENT_GAIN, (own_start, student.final)
    assert student.final.accuracy <= r1.final.accuracy - TEACHER_GAP, (student.final, r1.final)
    # the distillation data came from R1's final model: its point is R1's final one
    assert student.stages[0].points[0] == dataclasses.replace(r1.final, stage="teacher_data", step=0)
