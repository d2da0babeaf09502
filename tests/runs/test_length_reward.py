"""Length against reward over a run (issue 34's diagnostics): the correlations, the first and last tenth and the
sentence, each against an independent computation (numpy's corrcoef for Pearson; Spearman from ranks counted pair by
pair, ties averaged, in plain Python); the scatter's dots (one a step, or bucket means past MAX_DOTS) and arrow; the
explorer's section, present when a length and a reward were logged and absent otherwise."""
from __future__ import annotations

import math

import numpy as np
import pytest
from bs4 import BeautifulSoup
from run_fixtures import entry, state

from app.runs.domain import length_reward as lrm
from app.runs.domain.run_log import read_trainer_state
from app.runs.views.length_reward_chart import DOT_LIMIT, MAX_DOTS, length_reward_chart


def log_of(lengths, rewards, **more):
    entries = []
    for i, (length, reward) in enumerate(zip(lengths, rewards, strict=True)):
        e = entry(i + 1, **{"completions/mean_length": float(length), "reward": float(reward)})
        for name, values in more.items():
            e[name] = float(values[i])
        entries.append(e)
    return read_trainer_state(state(entries))


def spearman_by_hand(x, y):
    def rank(v):  # 1 + how many are smaller + half of the others equal to it: the mean rank of a tie
        return [1 + sum(w < a for w in v) + (sum(w == a for w in v) - 1) / 2 for a in v]
    return float(np.corrcoef(rank(list(x)), rank(list(y)))[0, 1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_numbers_equal_an_independent_computation(seed):
    rng = np.random.default_rng(seed)
    n = 57
    lengths = np.round(100 + np.cumsum(rng.normal(1, 3, n)))  # whole tokens: ties among the lengths
    rewards = 0.2 + 0.004 * np.arange(n) + rng.normal(0, 0.05, n)
    got = lrm.length_reward(log_of(lengths, rewards))
    assert got is not None and got.length_name == "completions/mean_length" and got.reward_name == "reward"
    assert got.steps == tuple(range(1, n + 1))
    assert got.pearson == pytest.approx(float(np.corrcoef(lengths, rewards)[0, 1]), abs=1e-12)
    assert got.spearman == pytest.approx(spearman_by_hand(lengths, rewards), abs=1e-12)
    k = n // 10
    assert got.early == pytest.approx((lengths[:k].mean(), rewards[:k].mean()), abs=1e-12)
    assert got.late == pytest.approx((lengths[-k:].mean(), rewards[-k:].mean()), abs=1e-12)


def test_the_sentence_says_which_way_with_its_numbers():
    steps = np.arange(40)
    up = lrm.length_reward(log_of(100 + 5 * steps, 0.1 + 0.01 * steps))
    assert up.sentence.startswith("Length and reward rose and fell together (Spearman ρ = 1.00, Pearson r = 1.00, "
                                  "over 40 steps)")
    assert "Mean length 108 → 288 tokens and mean reward 0.115 → 0.475 from the first 4 of these steps to the last 4" \
        in up.sentence
    down = lrm.length_reward(log_of(300 - 5 * steps, 0.1 + 0.01 * steps))
    assert down.sentence.startswith("Length and reward moved against each other (Spearman ρ = -1.00")
    rng = np.random.default_rng(7)
    unclear = lrm.length_reward(log_of(rng.permutation(100 + steps), 0.1 + 0.01 * steps))
    assert abs(unclear.spearman) < lrm.CLEAR and "did not move together clearly" in unclear.sentence
    flat = lrm.length_reward(log_of([64.0] * 40, 0.1 + 0.01 * steps))
    assert flat.pearson is None and flat.spearman is None
    assert "the length never changed, so there is no relation to measure" in flat.sentence


def test_a_length_at_the_limit_is_said_to_be_the_limits():
    steps = np.arange(40)
    cut = [0.1] * 30 + [0.9] * 10
    got = lrm.length_reward(log_of(100 + 5 * steps, 0.1 + 0.01 * steps, **{"completions/clipped_ratio": cut}))
    assert got.late_truncated == pytest.approx(0.9)
    assert got.sentence.endswith("But over the last 4 steps 90 % of completions were cut at the length limit: their "
                                 "length is the limit's, not the answers' own.")
    fine = lrm.length_reward(log_of(100 + 5 * steps, 0.1 + 0.01 * steps, **{"completions/clipped_ratio": [0.1] * 40}))
    assert "cut at the length limit" not in fine.sentence


def test_steps_missing_either_or_not_finite_are_left_out_and_the_window_applies():
    steps = np.arange(30, dtype=float)
    lengths, rewards = 100 + steps, 0.1 + 0.01 * steps
    lengths[3], rewards[7] = math.nan, math.inf
    log = log_of(lengths, rewards)
    got = lrm.length_reward(log)
    assert 4 not in got.steps and 8 not in got.steps and len(got.steps) == 28
    window = lrm.length_reward(log, 11, 20)
    assert window.steps == tuple(range(11, 21))
    assert lrm.length_reward(log, 11, 14) is None  # fewer than MIN_STEPS steps in view


def test_no_length_or_no_reward_says_nothing_and_other_frameworks_names_are_read():
    entries = [entry(s) for s in range(1, 21)]
    for e in entries:
        del e["completions/mean_length"]
    assert lrm.length_reward(read_trainer_state(state(entries))) is None
    unipo = [{"step": s, "response_length": 50.0 + s, "reward": 0.1 * s} for s in range(1, 21)]
    got = lrm.length_reward(read_trainer_state(state(unipo)))
    assert got.length_name == "response_length" and got.spearman == pytest.approx(1.0)
    verl = [{"step": s, "samples/completion_chars_mean": 400.0 - s, "samples/reward_mean": 0.1 * s} for s in range(1, 21)]
    got = lrm.length_reward(read_trainer_state(state(verl)))
    assert got.length_name == "samples/completion_chars_mean" and "characters" in got.sentence


def test_the_scatter_has_a_dot_a_step_or_bucket_means_and_its_arrow():
    steps = np.arange(60)
    few = lrm.length_reward(log_of(100 + steps, 0.1 + 0.01 * steps))
    chart = length_reward_chart(few, lambda s: f"?step={s}")
    assert len(chart.dots) == 60 <= DOT_LIMIT and all(d.url == f"?step={s + 1}" for s, d in enumerate(chart.dots))
    assert [d.phase for d in chart.dots[:20]] == ["early"] * 20 and chart.dots[-1].phase == "late"
    x0, y0, x1, y1 = chart.arrow  # right and up: longer and more reward
    assert x1 > x0 and y1 < y0
    assert chart.plot_left <= min(x0, x1) and max(x0, x1) <= chart.plot_right
    n = 10_000
    big = np.arange(n, dtype=float)
    many = lrm.length_reward(log_of(100 + big, 0.1 + big / n))
    chart = length_reward_chart(many, lambda s: f"?step={s}")
    assert len(chart.dots) == MAX_DOTS and all(d.url is None for d in chart.dots)
    edges = np.linspace(0, n, MAX_DOTS + 1).round().astype(int)
    first = chart.dots[0].label
    assert first.startswith(f"steps 1–{edges[1]} (mean): length {100 + big[:edges[1]].mean():.4g}")
    assert "drawn as 300 dots, each the mean of a run of consecutive steps" in chart.caption


def test_the_explorer_shows_it_when_logged_and_not_otherwise(make_client, tmp_path):
    client = make_client(data_dir=tmp_path)
    url = client.post("/api/runs/examples/trl").json()["url"]
    page = BeautifulSoup(client.get(url).text, "html.parser")
    section = page.find(id="length-reward")
    words = " ".join(section.get_text(" ").split())
    assert "Spearman ρ = 0.77" in words and "cut at the length limit" in words  # the example runs into its cap
    assert len(section.select(".run-lr-dot")) == 120 and section.find("line", class_="run-lr-arrow")
    zoomed = BeautifulSoup(client.get(url + "?from=100&to=110").text, "html.parser")
    assert len(zoomed.find(id="length-reward").select(".run-lr-dot")) == 11
    tiny = BeautifulSoup(client.get(url + "?from=100&to=102").text, "html.parser")
    assert tiny.find(id="length-reward") is None  # 3 steps: too few to say anything
