"""DeepSeek-R1's three training paths on the tiny LM (app/engine/lm_paths.py), on the running-sums
task (issue 22): the API's shapes, determinism, progress, and the directions the papers report, on
five seeds: R1-Zero's answers grow longer as accuracy rises (R1 Fig. 3), and what Dr. GRPO's
constant normaliser changes about the length of incorrect answers here.

The checks of determinism and progress use `scale`, which shortens every stage (a minute of torch
each: `make test-slower`); the cheapest checks run in `make test`. The research
reproductions (marked `reproduce`: full runs, five seeds) run in `make reproduce`; each full path
runs once per code version (≈ 80 s a seed with Dr. GRPO's run, one thread) and is kept on disk
(tests/reproduce_cache.py), so a rerun of unchanged code checks the same results in seconds."""
import dataclasses

import pytest
import torch
from reproduce_cache import kept

from app.kinds.tiny_lm.domain.arith_task import END, PAD, TOKEN_ID, encode
from app.kinds.tiny_lm.domain.sums_task import SIZES, make_sum_prompts
from app.kinds.tiny_lm.engine import lm_paths
from app.kinds.tiny_lm.engine.base_training import load_base
from app.kinds.tiny_lm.engine.lm_paths import PATH_IDS, PATH_TITLES, PathResult, run_path
from app.kinds.tiny_lm.engine.lm_plans import BASE_CHECKPOINT, DR_GRPO, STUDENT
from app.kinds.tiny_lm.engine.lm_sampling import sample_group, sample_groups
from app.kinds.tiny_lm.engine.lm_stages import MAX_NEW
from app.kinds.tiny_lm.engine.sums_base import STUDENT_CHECKPOINT
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM

SEEDS = (0, 1, 2, 3, 4)
QUICK = 0.1  # every stage at a tenth of its steps
# Margins of the directions, below the smallest gap measured on seeds 0-4 (docs/design.md §4d has the table).
ACCURACY_GAIN = 0.10  # R1-Zero: final accuracy − start accuracy
CORRECT_LENGTH_GROWTH = 1.3  # R1-Zero: mean length of correct completions, final / start (issue 22: +30 %)
STEPWISE_GAIN = 0.3  # R1-Zero: share of step-by-step answers, final − start
HARDEST_MARGIN = 0.03  # that gain on 6-number sums − on 2-number sums (measured 0.05-0.36, mean 0.17)
HARDEST_MEAN = 0.10  # the same, averaged over the five seeds
BOTH_GROW = 12.0  # GRPO and Dr. GRPO: tokens the incorrect completions' mean length grows by, each
SMALL_GAP = 0.3  # |GRPO's growth − Dr. GRPO's| as a share of the smaller one
MIXING_GAP = 0.10  # R1-Zero's final mixed rate − R1's
STUDENT_GAIN = 0.10  # the student's final accuracy − its own start
TEACHER_GAP = 0.03  # R1's final accuracy − the student's final (measured 0.06-0.17)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The app's setting (TORCH_THREADS=1): on two shared cores more threads only slow these down."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def full(path: str, seed: int) -> PathResult:
    if path == "distillation":
        full("r1", seed)  # R1 first, so distillation takes its final model from lm_paths' cache
        # (only when R1 ran in this process: a kept R1 leaves it to run R1 again, the same result)
    return kept(f"{path}-{seed}", lambda: run_path(path, seed))


def without_time(result: PathResult) -> PathResult:
    return dataclasses.replace(result, seconds=0.0)


def test_paths_and_titles():
    assert PATH_IDS == ("r1-zero", "r1", "distillation")
    assert set(PATH_TITLES) == set(PATH_IDS) and all(PATH_TITLES.values())
    with pytest.raises(ValueError, match="unknown path"):
        run_path("r2", scale=QUICK)


def test_the_student_is_smaller():
    base = sum(p.numel() for p in load_base(BASE_CHECKPOINT).parameters())
    student = sum(p.numel() for p in load_base(STUDENT_CHECKPOINT).parameters())
    assert (student, base) == (62_880, 108_416) and TinyLM(STUDENT).cfg == lm_paths.student_start().cfg


@torch.no_grad()
def plain_sampling(model, prompt_ids, group_size, max_new, seed):
    """The reference: one prompt, the whole sequence through TinyLM.forward for every new token
    (no cache, no batch of prompts), the same seeded draws."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor([prompt_ids] * group_size)
    done = torch.zeros(group_size, dtype=torch.bool)
    mask = torch.zeros(group_size, max_new)
    for t in range(max_new):
        logits = model(ids)[:, -1]
        logits[:, TOKEN_ID[PAD]] = float("-inf")
        token = torch.multinomial(torch.softmax(logits.double(), dim=-1), 1, generator=gen).squeeze(-1)
        token = torch.where(done, torch.full_like(token, TOKEN_ID[PAD]), token)
        mask[:, t] = (~done).to(mask.dtype)
        ids = torch.cat([ids, token.unsqueeze(-1)], dim=1)
        done |= token == TOKEN_ID[END]
        if bool(done.all()):
            return ids, mask[:, :t + 1]
    return ids, mask


def test_the_one_sampling_loop_draws_what_a_plain_loop_draws():
    """The KV-cached, batched loop (lm_sampling.sample_groups, behind sample_group too) gives the
    tokens a plain full-sequence loop gives, prompt by prompt, for the same seed."""
    model = load_base(BASE_CHECKPOINT)
    prompts = make_sum_prompts(6, seed=3)
    for i, prompt in enumerate(prompts):
        ids, mask = plain_sampling(model, encode(prompt.text), 8, MAX_NEW, seed=i)
        one = sample_group(model, encode(prompt.text), 8, MAX_NEW, seed=i)
        assert torch.equal(one.ids, ids) and torch.equal(one.mask, mask)
    # several prompts of one length in one bucket: each prompt's rows are its own group's draws
    (bucket,) = sample_groups(model, [encode(p.text) for p in prompts[:1]] * 2, 4, MAX_NEW, seed=11)
    assert bucket.members == (0, 1) and bucket.group.ids.shape[0] == 8


@pytest.mark.reproduce
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
        for point in stage.points:
            assert [n for n, _ in point.by_difficulty] == list(SIZES)
            assert sum(s.completions for _, s in point.by_difficulty) == point.stats.completions == 480
            for p in (point.stats, *(s for _, s in point.by_difficulty)):
                assert 0 <= p.mixed_rate <= 1 and 0 <= p.format_rate <= 1 and 0 <= p.accuracy <= 1
                assert 0 <= p.recheck_share <= p.stepwise_share <= 1
                assert 1 <= p.mean_length <= MAX_NEW and p.entropy >= 0 and p.kl_to_reference >= -1e-9
                for length in (p.mean_length_correct, p.mean_length_incorrect):
                    assert length is None or 1 <= length <= MAX_NEW
        if stage.kind == "rejection_sampling":
            assert len(stage.points) == 1
        else:
            assert len(stage.points) >= 3
    assert result.final == result.stages[-1].points[-1]
    assert len(result.examples) == 4 and all(prompt.endswith("=") for prompt, _ in result.examples)
    prompt, early, late = result.showcase
    assert prompt.count("+") == 5 and len(early) == len(late) == 4
    assert result.conventions["beta"] == 0.001 and result.conventions["loss_aggregation"] == "sample_mean"
    assert result.seconds > 0


@pytest.mark.slower_tier  # paths at a tenth of their steps: still a minute of torch each
@pytest.mark.parametrize("path", ["r1-zero", "r1"])
def test_deterministic(path):
    assert without_time(run_path(path, 5, scale=QUICK)) == without_time(run_path(path, 5, scale=QUICK))


@pytest.mark.slower_tier  # paths at a tenth of their steps: still a minute of torch each
def test_distillation_alone_runs_r1_first_and_reports_its_progress():
    calls = []
    alone = run_path("distillation", 6, progress=lambda *c: calls.append(c), scale=QUICK)
    teacher_stages = {c[0] for c in calls if c[0].startswith("r1/")}
    assert teacher_stages == {"r1/cold_start", "r1/reasoning_rl", "r1/rejection_sampling", "r1/sft", "r1/final_rl"}
    assert {c[0] for c in calls} - teacher_stages == {"teacher_data", "student_sft"}
    done = [c[2] for c in calls]
    assert done == sorted(done) and done[-1] == calls[-1][3] and len({c[3] for c in calls}) == 1
    # Now R1's final model is cached: the same result, from fewer steps.
    again = []
    assert without_time(run_path("distillation", 6, progress=lambda *c: again.append(c), scale=QUICK)) == \
        without_time(alone)
    assert again[-1][2] == again[-1][3] < calls[-1][3]
    assert not any(c[0].startswith("r1/") for c in again)


@pytest.mark.slower_tier  # paths at a tenth of their steps: still a minute of torch each
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


@pytest.mark.reproduce
@pytest.mark.parametrize("seed", SEEDS)
def test_directions(seed):
    """R1-Zero learns to answer and its answers grow longer, most of all by working step by step on
    the hardest sums; R1 stays in one script where R1-Zero mixes; the distilled student improves over
    its own start but stays below its teacher."""
    zero, r1, student = full("r1-zero", seed), full("r1", seed), full("distillation", seed)
    start, end = zero.stages[0].points[0], zero.final
    assert end.stats.accuracy >= start.stats.accuracy + ACCURACY_GAIN, (start.stats, end.stats)
    assert end.stats.mean_length_correct >= CORRECT_LENGTH_GROWTH * start.stats.mean_length_correct
    assert end.stats.stepwise_share >= start.stats.stepwise_share + STEPWISE_GAIN
    first, last = dict(start.by_difficulty), dict(end.by_difficulty)
    gains = {n: last[n].stepwise_share - first[n].stepwise_share for n in SIZES}
    # more on 6-number sums than on 2-number ones; the largest gain is not always at 6 (4 or 5 on
    # seeds 2-4)
    assert gains[max(SIZES)] >= gains[min(SIZES)] + HARDEST_MARGIN, gains
    assert r1.final.stats.mixed_rate <= end.stats.mixed_rate - MIXING_GAP, (r1.final.stats, end.stats)
    own_start = student.stages[-1].points[0]
    assert student.final.stats.accuracy >= own_start.stats.accuracy + STUDENT_GAIN, (own_start.stats,
                                                                                     student.final.stats)
    assert student.final.stats.accuracy <= r1.final.stats.accuracy - TEACHER_GAP, (student.final.stats,
                                                                                   r1.final.stats)
    # the distillation data came from R1's final model: its point is R1's final one
    assert student.stages[0].points[0] == dataclasses.replace(r1.final, stage="teacher_data", step=0)


def dr_grpo(seed: int) -> PathResult:
    return kept(f"dr-grpo-{seed}", lambda: run_path("r1-zero", seed, conventions=DR_GRPO))


@pytest.mark.reproduce
def test_step_by_step_spreads_more_on_the_hardest_sums_on_average():
    """Over the five seeds: each seed's gap measured from its own R1-Zero run (kept, or run here),
    never from what test_directions happened to leave in this process."""
    gaps = {}
    for seed in SEEDS:
        first, last = (dict(p.by_difficulty) for p in (full("r1-zero", seed).stages[0].points[0],
                                                          full("r1-zero", seed).final))
        gaps[seed] = ((last[max(SIZES)].stepwise_share - first[max(SIZES)].stepwise_share)
                      - (last[min(SIZES)].stepwise_share - first[min(SIZES)].stepwise_share))
    assert sum(gaps.values()) / len(SEEDS) >= HARDEST_MEAN, gaps


def _incorrect_growth(result: PathResult) -> float:
    start, end = result.stages[0].points[0].stats, result.final.stats
    return end.mean_length_incorrect - start.mean_length_incorrect


@pytest.mark.reproduce
def test_grpo_and_dr_grpo_from_the_same_start_measured_on_five_seeds():
    """Liu et al. 2025 (Dr. GRPO): GRPO's 1/|o| per completion lets incorrect answers grow longer; a
    constant normaliser does not. What this model shows instead (measured on seeds 0-4, docs/explanation/why-answers-grow-longer.md
    and the page give the numbers): incorrect answers grow about 20 tokens under both, because
    working step by step is what makes an answer long here, wrong or right; GRPO's growth is larger
    by 0.0 to 3.4 tokens (mean 1.6), the paper's direction but small beside what both share. The test
    holds that finding, with margins: a change of the model or recipe that moves it must say so."""
    for seed in SEEDS:
        assert dr_grpo(seed).conventions["loss_aggregation"] == "token_sum_norm"
        assert full("r1-zero", seed).conventions["loss_aggregation"] == "sample_mean"
    grpo = {seed: _incorrect_growth(full("r1-zero", seed)) for seed in SEEDS}
    dr = {seed: _incorrect_growth(dr_grpo(seed)) for seed in SEEDS}
    gaps = {seed: grpo[seed] - dr[seed] for seed in SEEDS}
    assert all(grpo[s] >= BOTH_GROW and dr[s] >= BOTH_GROW for s in SEEDS), (grpo, dr)
    assert all(abs(g) <= SMALL_GAP * min(grpo[s], dr[s]) for s, g in gaps.items()), gaps
    assert sum(gaps.values()) / len(gaps) >= 0, gaps  # the paper's direction, on average
