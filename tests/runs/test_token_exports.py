"""prime-rl's token exports and slime's train dumps read into per-step numbers (issue 34): the mask-aware
train/inference mismatch and where the gradient went, each number equal to a plain-Python float64 computation
over the files' own fields; malformed files refused by file and field path, never a traceback."""
from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
import torch
from token_fixtures import Seq, random_seq, slime_sample, write_prime_rl, write_slime

from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.token_exports import TokenExportError, find_token_exports
from app.runs.engine.token_run import as_trainer_state, read_export, read_token_run

C = 2.0


def reference(seqs: list[Seq], f32: bool = False, masked_tail: int = 0) -> dict[str, float]:
    """Every tokens/… number of one step, token by token in Python floats (float64), from the Seq lists."""
    def v(x: float) -> float:
        return float(np.float32(x)) if f32 else x

    d, adv, ent, geo, masked, blind = [], [], [], [], [], []
    for s in seqs:
        n = len(s.trainer) - masked_tail
        ds = [v(t) - v(i) for t, i in zip(s.trainer[:n], s.inference[:n], strict=True)]
        d += ds
        adv += [v(s.advantage)] * n
        ent += [v(e) for e in s.entropy[:n]]
        masked += (s.is_masked or [False] * len(s.trainer))[:n]
        geo.append(math.exp(sum(ds) / n))
        blind += [math.exp(x) - x - 1 for x in ds] + (
            [] if f32 else [math.exp(-2.5 - 0.1 * k) - (-2.5 - 0.1 * k) - 1 for k in range(s.prompt)])
        if f32:
            blind += [math.exp(v(t) - v(i)) - (v(t) - v(i)) - 1 for t, i in zip(s.trainer[n:], s.inference[n:], strict=True)]
    ratio = [math.exp(x) for x in d]
    absd = sorted(abs(x) for x in d)
    k = 0.99 * (len(absd) - 1)  # numpy's default (linear) percentile, by hand
    p99 = absd[math.floor(k)] + (absd[math.ceil(k)] - absd[math.floor(k)]) * (k - math.floor(k))
    zero = [a == 0 for a in adv]
    is_m = [m and not z for m, z in zip(masked, zero, strict=True)]
    w = sum(abs(a) for a in adv)
    out = {"mismatch_mean": sum(d) / len(d), "mismatch_abs_p99": p99, "mismatch_abs_max": absd[-1],
           "mismatch_kl": sum(math.exp(x) - x - 1 for x in d) / len(d),
           "mismatch_kl_mask_blind": sum(blind) / len(blind),
           "outside_is_band": sum(r < 1 / C or r > C for r in ratio) / len(d),
           "seq_outside_is_band": sum(g < 1 / C or g > C for g in geo) / len(geo),
           "zero_advantage": sum(zero) / len(d),
           "carry_gradient": sum(not z and not m for z, m in zip(zero, is_m, strict=True)) / len(d),
           "entropy_mean": sum(ent) / len(ent), "sequences": len(seqs), "trained_tokens": len(d)}
    if w > 0:
        out["tis_weight_scale"] = sum(abs(a) * min(r, C) for a, r in zip(adv, ratio, strict=True)) / w
    return out


def assert_matches(got: dict[str, float], expected: dict[str, float]) -> None:
    for key, value in expected.items():
        assert got["tokens/" + key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def prime_steps(rng):
    seqs = {3: [[random_seq(rng, outliers=2), random_seq(rng, advantage=0.0)],
                [random_seq(rng, n=7, drift=0.3), random_seq(rng, outliers=1)]],
            6: [[random_seq(rng, n=30, drift=0.01) for _ in range(4)]]}
    seqs[3][0][0].is_masked = [True, False] * 6
    return seqs


def test_prime_rl_steps_equal_a_float64_reference_over_every_rank(tmp_path):
    steps = prime_steps(np.random.default_rng(7))
    write_prime_rl(tmp_path, steps)
    run = read_token_run(tmp_path)
    assert run.sources == ("prime-rl",) and run.files == 3 and not run.refused and sorted(run.metrics) == [3, 6]
    for step, ranks in steps.items():
        seqs = [s for rank in ranks for s in rank]
        expected = reference(seqs)
        expected["is_masked"] = 6 / sum(len(s.trainer) for s in seqs)  # seq 0's six masked tokens, A != 0
        expected["carry_gradient"] = 1 - expected["zero_advantage"] - expected["is_masked"]
        if step == 6:
            expected["is_masked"] = 0.0
            expected["carry_gradient"] = 1 - expected["zero_advantage"]
        assert_matches(run.metrics[step], expected)
    # the masked prompt tokens (inference log-prob 0) inflate the mask-blind number, and only it
    assert run.metrics[6]["tokens/mismatch_kl_mask_blind"] > 50 * run.metrics[6]["tokens/mismatch_kl"]
    assert "tokens/loss_masked" not in run.metrics[3]  # prime-rl packs the prompt: its mask's zeros lose nothing


def test_without_the_trainers_is_mask_every_nonzero_advantage_carries_gradient(tmp_path):
    steps = {1: [[random_seq(np.random.default_rng(1)), random_seq(np.random.default_rng(2), advantage=0.0)]]}
    write_prime_rl(tmp_path, steps, masks=False)  # a loss with no DPPO mask writes is_masked as [null] * n
    got = read_token_run(tmp_path).metrics[1]
    assert "tokens/is_masked" not in got and got["tokens/carry_gradient"] == pytest.approx(0.5)


def test_slime_dumps_equal_a_float64_reference_of_their_float32_tensors(tmp_path):
    rng = np.random.default_rng(11)
    seqs = [random_seq(rng, outliers=3), random_seq(rng, advantage=0.0), random_seq(rng, n=20, drift=0.2)]
    seqs[2].truncated = True
    write_slime(tmp_path, {0: [slime_sample(s, i, masked_tail=2) for i, s in enumerate(seqs)]})
    run = read_token_run(tmp_path)
    assert run.sources == ("slime",) and not run.refused
    expected = reference(seqs, f32=True, masked_tail=2)
    assert_matches(run.metrics[0], expected)
    total = sum(len(s.trainer) for s in seqs)
    assert run.metrics[0]["tokens/loss_masked"] == pytest.approx(6 / total)
    assert run.metrics[0]["tokens/truncated"] == pytest.approx(1 / 3)


def test_a_run_with_no_trainer_state_is_stored_as_its_numbers_in_that_shape(tmp_path):
    write_prime_rl(tmp_path, prime_steps(np.random.default_rng(3)))
    run = read_token_run(tmp_path)
    log = read_trainer_state(as_trainer_state(run.metrics, ("prime-rl per-token files",)))
    assert log.steps == (3, 6)
    for step in (3, 6):
        for name, value in run.metrics[step].items():
            assert dict(log.series(name))[step] == value


BAD_PRIME = [
    (lambda o: o.pop("trainer_logprobs"), "$.trainer_logprobs: missing"),
    (lambda o: o.update(advantages=o["advantages"][:-1]), "advantages: expected a list of 17 numbers"),
    (lambda o: o["loss_mask"].__setitem__(4, 1), "loss_mask[4]: expected a boolean, got 1"),
    (lambda o: o["inference_logprobs"].__setitem__(6, "x"), "inference_logprobs[6]: expected a number or null"),
    (lambda o: o.update(schema_version=2), "schema_version: 2: this reader knows prime-rl's token export schema 1"),
    (lambda o: o.update(step=4), "step: 4 in the folder of step 3"),
    (lambda o: o.update(token_ids=[]), "token_ids: expected a non-empty list"),
]


@pytest.mark.parametrize("spoil,message", BAD_PRIME)
def test_a_malformed_prime_rl_line_is_refused_by_file_line_and_field(tmp_path, spoil, message):
    steps = {3: [[random_seq(np.random.default_rng(5)), random_seq(np.random.default_rng(6))]], 6: [[
        random_seq(np.random.default_rng(8))]]}
    write_prime_rl(tmp_path, steps)
    path = tmp_path / "token_exports" / "step_3" / "rank_0.jsonl"
    lines = path.read_text().splitlines()
    obj = json.loads(lines[1])
    spoil(obj)
    path.write_text(lines[0] + "\n" + json.dumps(obj) + "\n")
    run = read_token_run(tmp_path, label=lambda p: str(p.relative_to(tmp_path)))
    assert sorted(run.metrics) == [6]  # the spoiled step is left out, whole; the others stand
    (where, why), = run.refused
    assert where == "token_exports/step_3/rank_0.jsonl line 2"
    assert message in f"$.{why}" if message.startswith("$") else message in why
    assert why.endswith("(step 3 left out)")


def test_a_line_that_is_not_json_is_refused_by_its_number(tmp_path):
    write_prime_rl(tmp_path, {2: [[random_seq(np.random.default_rng(1))]]})
    path = tmp_path / "token_exports" / "step_2" / "rank_0.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    (where, why), = read_token_run(tmp_path).refused
    assert where.endswith("rank_0.jsonl line 2") and "not JSON" in why


class Evil:
    def __reduce__(self):
        return (print, ("pickled code ran",))


@pytest.mark.parametrize("spoil,message", [
    (lambda d: d.update(format_version=1), "format_version: 1: this reader knows slime's train dump format 2"),
    (lambda d: d.update(rollout_id=5), "rollout_id: 5 in a file named for 0"),
    (lambda d: d["samples"][1].pop("log_probs"), "samples[1].log_probs: missing"),
    (lambda d: d["samples"][0].update(advantages=torch.zeros(3)), "samples[0].advantages: 3 values, the response has"),
    (lambda d: d["samples"][0].update(loss_masks=torch.full((12,), 2)), "samples[0].loss_masks: expected 0/1"),
    (lambda d: d["samples"][2].update(rollout_log_probs=torch.zeros(2, 6)), "samples[2].rollout_log_probs: expected a 1-D"),
    (lambda d: d.update(samples="none"), "samples: expected a list"),
])
def test_a_malformed_slime_dump_is_refused_by_field_path(tmp_path, spoil, message):
    rng = np.random.default_rng(2)
    write_slime(tmp_path, {0: [slime_sample(random_seq(rng), i) for i in range(3)], 1: [slime_sample(random_seq(rng), 0)]})
    path = tmp_path / "train_data" / "0.pt"
    dump = torch.load(path, weights_only=True)
    spoil(dump)
    torch.save(dump, path)
    run = read_token_run(tmp_path)
    (where, why), = run.refused
    assert where == str(path) and message in why and sorted(run.metrics) == [1]


def test_a_slime_dump_that_pickles_objects_is_refused_unopened(tmp_path, capsys):
    (tmp_path / "train_data").mkdir()
    torch.save({"format_version": 2, "rollout_id": 0, "samples": [Evil()]}, tmp_path / "train_data" / "0.pt")
    (tmp_path / "train_data" / "1.pt").write_bytes(pickle.dumps([1, 2]) + b"junk")
    run = read_token_run(tmp_path)
    assert "pickled code ran" not in capsys.readouterr().out
    assert [why.startswith("$: not a torch file of tensors and plain values") for _, why in run.refused] == [True, True]
    assert not run.metrics


def test_which_files_are_read(tmp_path):
    for name in ("token_exports/step_1/rank_0.jsonl", "token_exports/step_1/rank_1.jsonl", "token_exports/step_1/STABLE",
                 "token_exports/stepx/rank_0.jsonl", "train_data/4.pt", "train_data/eval_4.pt", "rollout_data/4.pt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    found = [(f.step, f.source, f.path.name) for f in find_token_exports(tmp_path)]
    assert found == [(1, "prime-rl", "rank_0.jsonl"), (1, "prime-rl", "rank_1.jsonl"), (4, "slime", "4.pt")]
    assert list(read_export(find_token_exports(tmp_path)[0], "x")) == []  # an empty rank file: no sequences


def test_a_token_export_error_names_where_and_what():
    exc = TokenExportError("a.jsonl line 3", "loss_mask[2]", "expected a boolean")
    assert str(exc) == "a.jsonl line 3: loss_mask[2]: expected a boolean"
