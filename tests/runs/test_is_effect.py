"""What an IS correction does to a step's gradient (engine/is_effect.py), each number against a float64 numpy
computation written from the formulas, not from the engine: with π_old = π_trainer (ρ_θ/old = 1) and the token mean
over the step's N trained tokens, ∂loss/∂log π of a token of advantage A is −A·weight/N, the weight 1 (none),
min(ρ, C) (truncate), ρ inside [1/C, C] else 0 (mask), ρ = exp(d) per token or exp(Σ d) over the token's sequence
(TRL's sequence_* and verl's rollout_is="sequence": the product of the token ratios). C = 2.

On the step's arrays directly (ragged sequences, an empty one, chunks forced small), and through the run readers on
prime-rl and slime files, whose trained tokens the reference takes from the fixtures' own sequences."""
from __future__ import annotations

import numpy as np
import pytest
from token_fixtures import Seq, random_seq, slime_sample, write_prime_rl, write_slime

from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.token_exports import TokenSequence
from app.runs.domain.token_findings import gradient_masked
from app.runs.domain.token_stats import StepTokens
from app.runs.engine import is_effect
from app.runs.engine.is_effect import MODES, TrainedTokens, gradient, is_effect_metrics
from app.runs.engine.token_run import read_token_run
from app.runs.views.run_metrics import metric_words

C = 2.0
SHARE = {"token_truncate": "capped_share", "token_mask": "dropped_share", "sequence_truncate": "capped_share",
         "sequence_mask": "dropped_share"}


def reference(seqs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """seqs: (d, A) per sequence, trained tokens only. Per mode: the gradient per token, and where the bound binds."""
    d = np.concatenate([s[0] for s in seqs]).astype(np.float64)
    adv = np.concatenate([s[1] for s in seqs]).astype(np.float64)
    n = d.size
    with np.errstate(over="ignore"):  # exp(800) = inf: truncated to C, masked to 0
        seq = np.concatenate([np.full(len(s[0]), np.exp(np.sum(s[0], dtype=np.float64))) for s in seqs])
        token = np.exp(d)
    grads, hits = {"none": -adv / n}, {}
    for level, rho in (("token", token), ("sequence", seq)):
        grads[f"{level}_truncate"] = -adv * np.minimum(rho, C) / n
        hits[f"{level}_truncate"] = rho > C
        outside = (rho < 1 / C) | (rho > C)
        grads[f"{level}_mask"] = -adv * np.where(outside, 0.0, rho) / n
        hits[f"{level}_mask"] = outside
    return grads, hits


def reference_metrics(seqs) -> dict[str, float]:
    grads, hits = reference(seqs)
    g0 = grads["none"]
    out = {}
    for mode in MODES:
        g = grads[mode]
        out[f"tokens/is_grad/{mode}/norm_ratio"] = np.linalg.norm(g) / np.linalg.norm(g0)
        if np.linalg.norm(g) > 0:
            out[f"tokens/is_grad/{mode}/cosine"] = g @ g0 / (np.linalg.norm(g) * np.linalg.norm(g0))
        out[f"tokens/is_grad/{mode}/{SHARE[mode]}"] = np.abs(g0[hits[mode]]).sum() / np.abs(g0).sum()
    return out


def synthetic(seed: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    seqs = []
    for length in (7, 1, 0, 12, 3, 9, 5):
        d = rng.normal(0.0, 0.3, length)
        if length > 4:
            d[1], d[3] = 1.1, -0.9  # ratios 3.0 and 0.41: outside [0.5, 2]
        seqs.append((d, np.full(length, rng.normal())))
    seqs.append((np.array([0.05, -0.02]), np.zeros(2)))  # a tied group's sequence: no gradient
    return seqs


def tokens_of(seqs) -> TrainedTokens:
    return TrainedTokens(np.concatenate([s[0] for s in seqs]), np.concatenate([s[1] for s in seqs]),
                         np.array([len(s[0]) for s in seqs]))


def close(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name


def test_no_correction_is_minus_advantage_times_the_token_mean_weight():
    seqs = synthetic()
    tokens = tokens_of(seqs)
    g, hit = gradient(tokens, "none")
    assert np.allclose(g, -tokens.advantages * (1 / tokens.log_ratio.size), rtol=1e-13, atol=0)
    assert not hit.any()


@pytest.mark.parametrize("cells", [is_effect.CHUNK_CELLS, 5, 1])
def test_each_correction_s_gradient_per_token_is_the_formula_s(monkeypatch, cells):
    monkeypatch.setattr(is_effect, "CHUNK_CELLS", cells)  # chunks of a few cells give the same numbers
    seqs = synthetic()
    grads, hits = reference(seqs)
    tokens = tokens_of(seqs)
    for mode in MODES:
        g, hit = gradient(tokens, mode)
        assert np.allclose(g, grads[mode], rtol=1e-12, atol=1e-18), mode
        assert np.array_equal(hit, hits[mode]), mode
    close(is_effect_metrics(tokens), reference_metrics(seqs))


def test_truncation_s_mass_is_tis_weight_scale_and_a_tied_step_says_nothing():
    seqs = synthetic()
    acc = StepTokens(response_only=True)
    for d, a in seqs:
        acc.add(TokenSequence(np.ones(d.size, bool), a.copy(), -1.0 - d, np.full(d.size, -1.0), None, None, None))
    tokens = TrainedTokens(*acc.trained())
    g0, _ = gradient(tokens, "none")
    g, _ = gradient(tokens, "token_truncate")
    assert np.abs(g).sum() / np.abs(g0).sum() == pytest.approx(acc.metrics()["tokens/tis_weight_scale"], rel=1e-12)
    tied = [(d, np.zeros_like(a)) for d, a in seqs]
    assert is_effect_metrics(tokens_of(tied)) == {}


def test_a_mask_that_drops_everything_leaves_no_direction_and_per_token_advantages_skip_the_sequence_modes():
    far = [(np.array([2.0, 0.1]), np.full(2, 1.5)), (np.array([-1.0, -0.5]), np.full(2, -0.5))]
    got = is_effect_metrics(tokens_of(far))
    assert got["tokens/is_grad/sequence_mask/norm_ratio"] == 0.0
    assert got["tokens/is_grad/sequence_mask/dropped_share"] == 1.0
    assert "tokens/is_grad/sequence_mask/cosine" not in got
    close(got, reference_metrics(far))
    overflow = [(np.array([400.0, 400.0]), np.ones(2)), (np.array([0.1]), -np.ones(1)),
                (np.array([-600.0, -300.0]), np.full(2, 2.0)), (np.array([0.2]), -np.ones(1))]
    got = is_effect_metrics(tokens_of(overflow))  # ratios past float64's range: no NaN anywhere
    assert all(np.isfinite(v) for v in got.values())
    close(got, reference_metrics(overflow))
    gae = [(np.array([0.1, 0.9, -0.8]), np.array([1.0, 0.7, 0.2]))]  # PPO-style: A varies along the sequence
    got = is_effect_metrics(tokens_of(gae))
    assert {name.split("/")[2] for name in got} == {"token_truncate", "token_mask"}
    want = {k: v for k, v in reference_metrics(gae).items() if "/token_" in k}
    close(got, want)
    with pytest.raises(ValueError, match="one advantage per sequence"):
        gradient(tokens_of(gae), "sequence_mask")


def seq_numbers(seq: Seq, masked_tail: int = 0) -> tuple[np.ndarray, np.ndarray]:
    n = len(seq.trainer) - masked_tail
    d = np.asarray(seq.trainer[:n], dtype=np.float64) - np.asarray(seq.inference[:n], dtype=np.float64)
    return d, np.full(n, seq.advantage)


def test_prime_rl_exports_give_each_step_s_numbers(tmp_path):
    rng = np.random.default_rng(11)
    steps = {s: [[random_seq(rng, outliers=s) for _ in range(3)], [random_seq(rng, n=20)]] for s in (1, 2, 3)}
    write_prime_rl(tmp_path, steps)
    run = read_token_run(tmp_path)
    for step, ranks in steps.items():
        # the reader reads rank 0's lines, then rank 1's: the order of the sequences back to back
        want = reference_metrics([seq_numbers(q) for rank in ranks for q in rank])
        close({k: v for k, v in run.metrics[step].items() if "/is_grad/" in k}, want)


def test_slime_dumps_give_each_step_s_numbers_with_the_loss_mask_applied(tmp_path):
    rng = np.random.default_rng(12)
    seqs = [random_seq(rng, n=10, outliers=2, drift=0.2) for _ in range(4)]
    samples = [slime_sample(q, i, masked_tail=3 if i == 1 else 0) for i, q in enumerate(seqs)]
    write_slime(tmp_path, {5: samples})
    got = read_token_run(tmp_path).metrics[5]
    # slime stores float32: the reference takes the same float32 numbers, widened
    f32 = [Seq(q.prompt, list(np.float32(q.trainer)), list(np.float32(q.inference)), float(np.float32(q.advantage)),
               q.entropy) for q in seqs]
    want = reference_metrics([seq_numbers(q, 3 if i == 1 else 0) for i, q in enumerate(f32)])
    close({k: v for k, v in got.items() if "/is_grad/" in k}, want)


def run(per_step: dict[str, list[float]]):
    n = len(next(iter(per_step.values())))
    return read_trainer_state({"log_history": [{"step": s + 1, **{k: v[s] for k, v in per_step.items()}}
                                               for s in range(n)]})


def test_the_mask_drop_finding_names_the_worst_step_and_level():
    log = run({"tokens/is_grad/token_mask/dropped_share": [0.01, 0.03, 0.02],
               "tokens/is_grad/sequence_mask/dropped_share": [0.05, 0.14, 0.4],
               "tokens/is_grad/sequence_mask/norm_ratio": [0.9, 0.86, 0.5],
               "tokens/is_grad/sequence_mask/cosine": [0.99, 0.93, 0.7]})
    (f,) = gradient_masked(log)
    assert f.steps == (3,) and f.numbers["steps_over"] == 2
    assert f.sentence == (
        "At step 3, a sequence-level importance-sampling mask at [0.5, 2] (a whole sequence on the product of its "
        "token ratios, TRL's sequence_mask) would drop 40 % of the uncorrected gradient (its Σ|∂loss/∂log π| over "
        "trained tokens, recomputed); the token-level mask 2 %. What it keeps would be 0.5 × as long as the "
        "uncorrected gradient, at cosine 0.7 to it. 2 of 3 steps had a mask drop at least 10 %.")
    assert "tokens/is_grad/sequence_mask/dropped_share" in f.metrics
    everything = run({"tokens/is_grad/sequence_mask/dropped_share": [1.0],
                      "tokens/is_grad/sequence_mask/norm_ratio": [0.0]})
    (f,) = gradient_masked(everything)
    assert "would drop 100 % of the uncorrected gradient" in f.sentence
    assert "Nothing of the step's gradient would be left. 1 of 1 steps" in f.sentence


def test_the_mask_drop_finding_is_silent_under_its_threshold_and_without_the_numbers():
    assert gradient_masked(run({"tokens/is_grad/token_mask/dropped_share": [0.01, 0.099],
                             "tokens/is_grad/sequence_mask/dropped_share": [0.0, 0.05]})) == []
    assert gradient_masked(run({"tokens/outside_is_band": [0.3, 0.5]})) == []


def test_every_number_has_its_words_in_the_explorer():
    got = is_effect_metrics(tokens_of(synthetic()))
    for name in got:
        words = metric_words(name)
        assert words.section == "What IS correction does to the gradient (per token)" and words.sentence, name
