"""Tied groups where a run's files let them be counted, and a plain sentence where they do not (issue 50).

prime-rl's token export (schema 1, token_export.py at 559b447) writes no group id, no problem id and no reward per
sequence: `env_name`, the token columns and the exporter's own derived ones. Trained tokens with advantage 0 there
cannot be told apart as a tied group's or a response's that scored exactly its group's mean, so the finding
(`ties_uncounted`) says so with the share, computed here again in float64 from the sequences written. Where the
run's log or dumps count the groups (TRL's frac_reward_zero_std, slime's or verl's rollout dumps), `tied_groups`
speaks instead and `ties_uncounted` is silent at those steps."""
from __future__ import annotations

import json

import numpy as np
from bs4 import BeautifulSoup
from run_fixtures import healthy
from slime_fixtures import groups_of, megatron_layout, write_ranks, write_rollout
from token_fixtures import random_seq, write_prime_rl

from app.__main__ import main as app_main
from app.runs.domain.run_findings import findings
from app.runs.domain.run_log import read_trainer_state
from app.runs.domain.token_findings import ties_uncounted
from app.runs.engine.token_run import as_trainer_state, read_token_run

UNCOUNTED = ("this run's files have no group ids (prime-rl's token export has none, nor rewards; slime's train dumps "
             "have none, its rollout_data/ dumps have them), so tied groups cannot be counted: those tokens are a tied "
             "group's (every reward equal) or a response's that scored exactly its group's mean.")


def run(per_step: dict[str, list[float | None]]):
    n = len(next(iter(per_step.values())))
    return read_trainer_state({"log_history": [
        {"step": s + 1, **{k: v[s] for k, v in per_step.items() if v[s] is not None}} for s in range(n)]})


def test_the_sentence_names_the_worst_step_its_share_and_how_many_steps():
    (f,) = ties_uncounted(run({"tokens/zero_advantage": [0.0, 0.43, 0.2, 0.0]}))
    assert f.rule == "ties_uncounted" and f.steps == (2,) and f.numbers == {"worst_step": 2, "worst_share": 0.43,
                                                                           "steps": 2}
    assert f.sentence == (f"At step 2, 43 % of the trained tokens carry advantage 0; {UNCOUNTED} 2 of 4 steps had "
                          "trained tokens with advantage 0 and no count of tied groups.")
    assert f.metrics == ("tokens/zero_advantage",)


def test_steps_whose_groups_are_counted_are_left_to_the_tied_groups_finding():
    both = {"tokens/zero_advantage": [0.6, 0.43, 0.2], "samples/tied_group_share": [0.7, 0.4, None]}
    (f,) = ties_uncounted(run(both))  # steps 1 and 2 are counted; step 3 is not
    assert f.steps == (3,) and f.numbers["steps"] == 1 and "At step 3, 20 % " in f.sentence
    assert [g.rule for g in findings(run(both)) if g.rule in ("tied_groups", "ties_uncounted")] == [
        "tied_groups", "ties_uncounted"]
    trl = {"tokens/zero_advantage": [0.6, 0.43], "frac_reward_zero_std": [0.6, 0.3]}
    assert ties_uncounted(run(trl)) == []
    assert ties_uncounted(run({"tokens/zero_advantage": [0.0, 0.0]})) == []
    assert ties_uncounted(run({"loss": [0.1, 0.2]})) == []  # no per-token numbers: nothing to say


def prime_dir(root, zero: dict[int, int]):
    """Steps 1..4 over two ranks of 3 sequences; at step s the first zero[s] sequences have advantage 0."""
    rng = np.random.default_rng(12)
    data = {}
    for s in range(1, 5):
        seqs = [random_seq(rng, n=int(rng.integers(6, 30))) for _ in range(6)]
        for q in seqs[:zero.get(s, 0)]:
            q.advantage = 0.0
        data[s] = [seqs[:3], seqs[3:]]
    write_prime_rl(root, data)
    return data


def zero_share(ranks) -> float:
    """Trained tokens with advantage 0 over all trained tokens, in Python floats (every completion token is trained
    in these sequences; the prompt's are not)."""
    seqs = [q for rank in ranks for q in rank]
    return sum(len(q.trainer) for q in seqs if q.advantage == 0.0) / sum(len(q.trainer) for q in seqs)


def test_a_prime_rl_run_with_zero_advantage_tokens_says_ties_cannot_be_counted(tmp_path, capsys, monkeypatch,
                                                                               make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    data = prime_dir(tmp_path / "out", {2: 2, 3: 4})
    shares = {s: zero_share(ranks) for s, ranks in data.items()}
    got = read_token_run(tmp_path / "out").metrics
    for s, share in shares.items():
        assert got[s]["tokens/zero_advantage"] == share  # the same ratio of the same integers
    assert app_main(["open", str(tmp_path / "out"), "--port", "8124"]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith("- [ties_uncounted]"))
    assert line == (f"- [ties_uncounted] At step 3, {100 * shares[3]:.0f} % of the trained tokens carry advantage 0; "
                    f"{UNCOUNTED} 2 of 4 steps had trained tokens with advantage 0 and no count of tied groups.")
    assert not any(x.startswith("- [tied_groups]") for x in out)
    client = make_client(data_dir=tmp_path / "data")
    url = out[-1].removeprefix("open http://127.0.0.1:8124")
    page = BeautifulSoup(client.get(url).text, "html.parser").get_text(" ")
    assert "tied groups cannot be counted" in " ".join(page.split())
    (f,) = [f for f in client.get("/api" + url).json()["findings"] if f["rule"] == "ties_uncounted"]
    assert f["numbers"]["worst_share"] == shares[3] and f["steps"] == [3]


def test_a_prime_rl_run_whose_log_counts_the_groups_gets_the_tied_groups_finding(tmp_path):
    prime_dir(tmp_path, {2: 2, 3: 4})
    tokens = read_token_run(tmp_path).metrics
    state = healthy(4)
    for entry, share in zip(state["log_history"], (0.0, 0.25, 0.75, 0.0), strict=False):
        entry["frac_reward_zero_std"] = share
    log = json.loads(as_trainer_state(tokens, ("prime-rl per-token files",)))["log_history"]
    for entry, mine in zip(state["log_history"], log, strict=False):
        entry.update({k: v for k, v in mine.items() if k != "step"})
    rules = {f.rule: f for f in findings(read_trainer_state(state))}
    assert "ties_uncounted" not in rules and rules["tied_groups"].steps == (3,)


def test_no_zero_advantage_no_finding(tmp_path):
    prime_dir(tmp_path, {})
    metrics = read_token_run(tmp_path).metrics
    log = read_trainer_state(as_trainer_state(metrics, ("prime-rl per-token files",)))
    assert all(m["tokens/zero_advantage"] == 0.0 for m in metrics.values()) and ties_uncounted(log) == []


def test_slime_train_dumps_count_their_ties_only_with_the_rollout_dumps(tmp_path):
    rng = np.random.default_rng(2)
    seqs = [random_seq(rng, advantage=0.0 if i < 4 else None) for i in range(6)]
    write_ranks(tmp_path, 1, megatron_layout(1, [(seqs[:3], [0, 1, 2]), (seqs[3:], [3, 4, 5])], [1.0] * 6, tp=2))
    alone = read_trainer_state(as_trainer_state(read_token_run(tmp_path).metrics, ("slime",)))
    (f,) = ties_uncounted(alone)
    assert f.numbers["worst_share"] == sum(len(q.trainer) for q in seqs[:4]) / sum(len(q.trainer) for q in seqs)
    write_rollout(tmp_path, 1, groups_of([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]]))
    counted = read_trainer_state(as_trainer_state(read_token_run(tmp_path).metrics, ("slime",)))
    rules = {g.rule: g for g in findings(counted)}
    assert "ties_uncounted" not in rules and rules["tied_groups"].numbers["worst_share"] == 2 / 3
