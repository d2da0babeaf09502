"""slime's dumps in every layout its writers produced (issue 50): the per-rank train dumps of before format 2
(`train_data/{rollout_id}_{rank}.pt`) put back together as one step, each sample once, equal to a float64 reference
and to the same batch written as format 2; and the rollout dumps (`rollout_data/{rollout_id}.pt`, Sample.to_dict()
lists read with weights_only=True) giving the groups, rewards and tied groups, checked against plain Python and
`statistics`. Refusals name the file and field; opened from the command line and from an upload, the tied-group
finding is there."""
from __future__ import annotations

import io
import math
import statistics
import zipfile

import numpy as np
import pytest
import torch
from slime_fixtures import groups_of, megatron_layout, rank_payload, sample_dict, write_ranks, write_rollout
from test_token_exports import Evil, assert_matches, reference
from token_fixtures import random_seq, slime_sample, write_slime

from app.__main__ import main as app_main
from app.runs.domain.token_exports import find_token_exports
from app.runs.engine.token_run import read_token_run

REWARDS = [[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, None, 0.5, 0.5], [1.0]]


def shards(seed: int = 3):
    rng = np.random.default_rng(seed)
    first = [random_seq(rng, outliers=2), random_seq(rng, advantage=0.0), random_seq(rng, n=20, drift=0.2)]
    second = [random_seq(rng, advantage=0.0), random_seq(rng, n=9)]
    second[1].truncated = True
    return [(first, [0, 1, 2]), (second, [3, 4])]


def test_per_rank_files_are_one_step_with_each_sample_once(tmp_path):
    parts = shards()
    write_ranks(tmp_path, 7, megatron_layout(7, parts, [1.0, 0.0, 1.0, 0.0, 1.0], tp=2, pp=2, masked_tail=1))
    assert [(f.step, f.rank) for f in find_token_exports(tmp_path)] == [(7, r) for r in range(8)]
    run = read_token_run(tmp_path)
    assert run.sources == ("slime",) and run.files == 8 and not run.refused and list(run.metrics) == [7]
    seqs = [s for part, _ in parts for s in part]
    got = run.metrics[7]
    assert_matches(got, reference(seqs, f32=True, masked_tail=1))  # 5 samples, not 8 ranks' worth
    assert got["tokens/sequences"] == 5 and got["tokens/truncated"] == pytest.approx(1 / 5)
    assert got["tokens/loss_masked"] == pytest.approx(5 / sum(len(s.trainer) for s in seqs))
    # the same batch as slime's format 2 writes it: the same numbers, every one
    other = tmp_path / "format2"
    write_slime(other, {7: [slime_sample(s, i, masked_tail=1) for i, s in enumerate(seqs)]})
    assert read_token_run(other).metrics[7] == got


def spoil_copy(files):
    files[5]["rollout_data"]["log_probs"][0][0] += 0.1  # rank 5: a tensor-parallel copy of rank 4's shard


def cp_slice(files):
    for rank in (4, 5):  # ranks 0-3 are the first pipeline stage
        files[rank]["rollout_data"]["log_probs"][1] = files[rank]["rollout_data"]["log_probs"][1][:6]


def drop_last_stage(files):
    del files[6], files[7]  # the last stage of the second shard: its samples' log-probs are nowhere


@pytest.mark.parametrize("spoil,message", [
    (spoil_copy, "rollout_data.sample_indices[0]: sample 0 differs from its copy in "),
    (cp_slice, "rollout_data.log_probs[1]: 6 values, the response has 12: a context-parallel rank's slice"),
    (drop_last_stage, "rollout_data.log_probs: missing for 2 sample(s) (first: sample 3), and no other rank"),
    (lambda f: f[4].update(rank=9), "rank: 9 in a file named for rank 4"),
    (lambda f: f[4].update(rollout_id=8), "rollout_id: 8 in a file named for 7"),
    (lambda f: f[4]["rollout_data"]["advantages"].pop(), "rollout_data.advantages: expected one entry per sample "
                                                          "(3), got 2 entries"),
    (lambda f: f[0]["rollout_data"].pop("sample_indices"), "rollout_data.sample_indices: expected a list"),
    (lambda f: f[5]["rollout_data"].pop("rollout_log_probs"), "rollout_data.rollout_log_probs: missing: slime's "
                                                               "train data carries the inference log-probs from 067d65a"),
    (lambda f: f[5]["rollout_data"]["loss_masks"].pop(), "rollout_data.loss_masks: expected one entry per sample"),
    (lambda f: [f.pop(r) for r in (2, 3, 6, 7)], "rollout_data.raw_reward: the batch has 5 samples, rollout 7's "
                                                 "rank files hold 3: some shard's files are missing"),
])
def test_a_bad_rank_file_leaves_its_rollout_out_by_file_and_field(tmp_path, spoil, message):
    files = megatron_layout(7, shards(), [1.0] * 5, tp=2, pp=2)
    spoil(files)
    write_ranks(tmp_path, 7, files)
    write_ranks(tmp_path, 9, megatron_layout(9, shards(5), [1.0] * 5, tp=1))
    run = read_token_run(tmp_path, label=lambda p: p.name)
    (where, why), = run.refused
    assert where.startswith("7_") and message in why and why.endswith("(step 7 left out)")
    assert list(run.metrics) == [9]  # the other rollout stands


def test_both_layouts_for_one_rollout_and_pickled_objects_are_refused(tmp_path, capsys):
    parts = shards()
    write_ranks(tmp_path, 1, megatron_layout(1, parts, [1.0] * 5, tp=1))
    write_slime(tmp_path, {1: [slime_sample(s, i) for i, s in enumerate(parts[0][0])]})
    payload = rank_payload(2, 0, parts[0][0], [0, 1, 2], [1.0] * 3)
    payload["rollout_data"]["metadata"] = [Evil()] * 3
    torch.save(payload, tmp_path / "train_data" / "2_0.pt")
    run = read_token_run(tmp_path, label=lambda p: p.name)
    assert "pickled code ran" not in capsys.readouterr().out and not run.metrics
    assert [(w, why.split(":")[0] if w == "2_0.pt" else why) for w, why in run.refused] == [
        ("1.pt", "$: rollout 1 has both slime's format-2 dump and per-rank dumps: two copies of one step, neither is "
                 "chosen (step 1 left out)"), ("2_0.pt", "$")]
    assert "not a torch file of tensors and plain values" in run.refused[1][1]


def tie_reference(groups: list[list]) -> dict[str, float]:
    """The rollout dump's numbers in plain Python: groups of two or more scored rewards, tied when all equal."""
    flat = [r for g in groups for r in g]
    scored = [float(r) for r in flat if r is not None]
    multi = [[r for r in g if r is not None] for g in groups]
    multi = [g for g in multi if len(g) >= 2]
    tied = [g for g in multi if len(set(g)) == 1]
    return {"samples/count": len(flat), "samples/groups": len(groups), "samples/reward_mean": statistics.fmean(scored),
            "samples/reward_std": statistics.stdev(scored), "samples/unscorable_share": 1 - len(scored) / len(flat),
            "samples/tied_group_share": len(tied) / len(multi),
            "samples/tied_sample_share": sum(len(g) for g in tied) / len(flat),
            "samples/truncated_share": 0.0, "samples/response_length_mean": 12.0}


@pytest.mark.parametrize("group_ids", [True, False])  # before Sample.group_index (c7dc52e): grouped by prompt
def test_rollout_dumps_give_groups_rewards_and_ties(tmp_path, group_ids):
    write_rollout(tmp_path, 3, groups_of(REWARDS, group_ids=group_ids))
    write_rollout(tmp_path, 3, groups_of(REWARDS, group_ids=group_ids)).rename(tmp_path / "rollout_data" / "eval_3.pt")
    write_rollout(tmp_path, 3, groups_of(REWARDS, group_ids=group_ids))
    run = read_token_run(tmp_path)
    assert run.files == 1 and run.sources == ("slime",) and not run.refused
    expected = tie_reference(REWARDS)
    assert expected["samples/tied_group_share"] == 0.75  # groups 0, 2 and 3 of the four with two scored rewards
    assert run.metrics[3].keys() == expected.keys()
    for name, value in expected.items():
        assert run.metrics[3][name] == pytest.approx(value, rel=1e-12, abs=0), name


def test_rollout_dumps_join_the_train_dumps_of_the_same_rollout(tmp_path):
    write_ranks(tmp_path, 3, megatron_layout(3, shards(), [1.0] * 5, tp=2))
    samples = groups_of(REWARDS)
    samples[1]["status"] = "truncated"
    write_rollout(tmp_path, 3, samples)
    run = read_token_run(tmp_path)
    got = run.metrics[3]
    assert run.files == 5 and got["tokens/sequences"] == 5 and got["samples/count"] == 17
    assert got["samples/truncated_share"] == pytest.approx(1 / 17)


def test_dict_rewards_give_each_keys_mean_and_no_tie_count(tmp_path):
    samples = [sample_dict(i, i // 2, {"acc": float(i % 2), "format": 1.0, "pred": "x"}) for i in range(6)]
    write_rollout(tmp_path, 0, samples)
    got = read_token_run(tmp_path).metrics[0]
    assert got["samples/rewards/acc/mean"] == 0.5 and got["samples/rewards/format/mean"] == 1.0
    assert "samples/tied_group_share" not in got and "samples/reward_mean" not in got


@pytest.mark.parametrize("spoil,message", [
    (lambda d: d.update(rollout_id=4), "rollout_id: 4 in a file named for 3"),
    (lambda d: d["samples"][2].update(reward="1"), "samples[2].reward: expected a number, a dict or null, got str"),
    (lambda d: d["samples"][1].pop("reward"), "samples[1].reward: missing"),
    (lambda d: d.update(samples={"a": 1}), "samples: expected a list"),
    (lambda d: d["samples"].append(Evil()), "$: not a torch file of tensors and plain values"),
])
def test_a_bad_rollout_dump_is_refused_and_the_train_numbers_stand(tmp_path, capsys, spoil, message):
    write_ranks(tmp_path, 3, megatron_layout(3, shards(), [1.0] * 5, tp=1))
    dump = {"rollout_id": 3, "samples": groups_of(REWARDS)}
    spoil(dump)
    (tmp_path / "rollout_data").mkdir()
    torch.save(dump, tmp_path / "rollout_data" / "3.pt")
    run = read_token_run(tmp_path, label=lambda p: p.name)
    assert "pickled code ran" not in capsys.readouterr().out
    (where, why), = run.refused
    assert where == "3.pt" and message in why and why.endswith("(its samples/… left out)")
    assert "tokens/sequences" in run.metrics[3] and "samples/count" not in run.metrics[3]


def slime_run(root):
    for rollout in (1, 2):
        write_ranks(root, rollout, megatron_layout(rollout, shards(rollout), [1.0] * 5, tp=2, pp=2))
    write_rollout(root, 1, groups_of(REWARDS))
    write_rollout(root, 2, groups_of([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0, 0.0]], first_index=17))
    return root


TIED = ("At step 1, 75 % of the groups had every reward equal (samples/tied_group_share): their advantages are 0 and "
        "they give no gradient. 1 of 2 steps had at least 50 % of their groups tied.")


def test_a_slime_directory_opens_from_the_command_line_with_its_tied_groups(tmp_path, capsys, monkeypatch,
                                                                            make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    slime_run(tmp_path / "out")
    assert app_main(["open", str(tmp_path / "out"), "--port", "8124"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "2 logged steps (1 to 2)" in out[0]
    # 2 × 8 rank files and 2 rollout dumps, said apart (dumps hold no tokens)
    assert out[1].startswith("per-token files (slime): 16 read, slime's rollout dumps: 2 read, 2 steps")
    assert f"- [tied_groups] {TIED}" in out and not any("[ties_uncounted]" in line for line in out)
    api = make_client(data_dir=tmp_path / "data").get("/api" + out[-1].removeprefix("open http://127.0.0.1:8124"))
    assert api.json()["metrics"]["samples/tied_group_share"]["logged"] == 2


def test_a_slime_directory_opens_from_an_upload(tmp_path, make_client):
    root = slime_run(tmp_path / "out")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                zf.write(p, "out/" + p.relative_to(root).as_posix())
    client = make_client(data_dir=tmp_path / "data", follow_redirects=False)
    r = client.post("/api/runs", content=buf.getvalue(), headers={"content-type": "application/zip"})
    assert r.status_code == 201, r.text
    run = client.get("/api" + r.json()["url"]).json()
    assert r.json()["refused"] == []
    assert [f["sentence"] for f in run["findings"] if f["rule"] == "tied_groups"] == [TIED]
    assert math.isclose(run["findings"][[f["rule"] for f in run["findings"]].index("tied_groups")]["numbers"]
                        ["worst_share"], 0.75)


def test_every_number_a_rollout_dump_gives_says_what_it_is():
    """The explorer's chart titles: a samples/… name with no words would be a bare key on the page."""
    from app.runs.views.run_metrics import metric_words

    for name in tie_reference([[1.0, 0.0], [1.0, 1.0]]):
        assert metric_words(name).sentence, name
