"""Issue 32: a record's page explains every mismatch (its size, its computed cause, the switch that
tests it), checks or lists every logged metric, says what its numbers count, names what its length/reward
correlation is between, shows its own words for its graph's nodes, lists the what-if's changed conventions,
and opens the shipped examples from the upload page."""
from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup
from paths import ROOT
from record_factory import make_record

from app.engine.grpo import objective
from app.engine.grpo.params import Conventions
from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine import checks as record_checks
from app.kinds.step_record.engine.step import recompute
from app.kinds.step_record.views.diagnostics import length_reward

UNIPO = ROOT / "tests" / "fixtures" / "unipo_canonical.json"
TRL = ROOT / "tests" / "fixtures" / "trl_step_record.grpo-step.json"


@pytest.fixture(scope="module")
def client(make_client):
    return make_client()


def upload(client, body: bytes) -> str:
    response = client.post("/api/walkthroughs", files={"file": ("step.json", body, "application/json")})
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def page(client, url: str) -> BeautifulSoup:
    response = client.get(url)
    assert response.status_code == 200, (url, response.text[:400])
    return BeautifulSoup(response.text, "html.parser")


@pytest.fixture(scope="module")
def unipo_id(client):
    return upload(client, UNIPO.read_bytes())


@pytest.fixture(scope="module")
def trl_id(client):
    return upload(client, TRL.read_bytes())


def advantage_cells(soup: BeautifulSoup) -> list[str]:
    return [tr.select("td")[-1].get_text(" ", strip=True) for tr in soup.select("#record-group-table tbody tr")]


def test_a_unipo_advantage_mismatch_has_its_size_its_cause_and_a_switch_that_makes_it_agree(client, unipo_id):
    soup = page(client, f"/walkthroughs/{unipo_id}/steps/group")
    cells = advantage_cells(soup)
    assert len(cells) == 4 and all("≠" in c and "Δ" in c and "of A" in c for c in cells)  # every row, sized
    cause = soup.select_one("#advantage-cause").get_text(" ", strip=True)
    assert "sample std + ε = 0.0001" in cause and "the reader assumed it" in cause
    assert "match sample std, no ε (exactly" in cause
    href = soup.select_one("#advantage-cause a.switch-link")["href"]
    assert "advantage_epsilon=0" in href and "preset" not in href  # the record's own conventions, ε changed
    after = page(client, href.split("#")[0])
    assert [c.split()[-1] for c in advantage_cells(after)] == ["="] * 4
    assert after.select_one("#advantage-cause") is None
    assert "no ε" in after.select_one("#record-group-table caption").get_text()


def test_the_ε_0_what_if_keeps_every_other_convention_of_the_record():
    record = parse_record(UNIPO.read_bytes(), str(UNIPO))
    own = recompute(record)
    assert np.abs(own.advantages - own.advantages_from_rewards).max() > 1e-4  # the assumed ε 1e-4 is off
    switched = Conventions(**{**own.conventions.model_dump(), "advantage_epsilon": 0})
    other = recompute(record, switched)
    assert np.abs(other.advantages_from_rewards - own.advantages).max() < 1e-12
    assert other.loss == pytest.approx(own.loss, rel=1e-12)  # the file's advantages are ε = 0 ones


def test_ε_0_gives_an_equal_group_advantage_0_not_nan():
    import torch
    a = objective.group_advantages(torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64), "sample", 0.0)
    assert a.tolist() == [0.0, 0.0, 0.0]
    assert Conventions(advantage_epsilon=0).advantage_epsilon == 0.0


def test_every_logged_unipo_metric_is_checked_or_listed_with_a_reason():
    record = parse_record(UNIPO.read_bytes(), str(UNIPO))
    result = recompute(record)
    found = {c.key.split(" ")[-1].rstrip(")") if "logged as" in c.key else c.key: c for c in record_checks.checks(record, result)}
    for key in ("clip_fraction", "response_length", "reward_std", "advantage_std", "advantage_mean", "reward",
                "policy_loss", "policy_objective", "kl"):
        assert key in found and found[key].ok, (key, sorted(found))
    assert found["clip_fraction"].recomputed == pytest.approx(record.metrics["clip_fraction"], rel=1e-12)
    assert found["response_length"].recomputed == 14.5
    listed = {u.key: u.reason for u in record_checks.unchecked(record, result)}
    assert set(listed) == {"learning_rate"} and "optimizer" in listed["learning_rate"]
    assert set(found) | set(listed) == set(record.metrics)


def test_every_logged_trl_metric_is_checked_or_listed(client, trl_id):
    soup = page(client, f"/walkthroughs/{trl_id}/steps/loss")
    checked = {tr.th.get_text(strip=True).split(" ")[0] for tr in soup.select("#record-checks tbody tr")}
    listed = {li.code.get_text() for li in soup.select("#record-unchecked li")}
    record = parse_record(TRL.read_bytes(), str(TRL))
    assert checked | listed == set(record.metrics)
    assert listed == {"grad_norm", "learning_rate", "step_time", "epoch"}
    assert "weights" in soup.select_one("#record-unchecked").get_text()


def test_verl_metrics_are_mapped_or_listed():
    raw = make_record(seed=21, loss_aggregation="token_mean", beta=0.0)
    record = parse_record(raw)
    result = recompute(record)
    lengths = [len(c["token_ids"]) for g in raw["groups"] for c in g["completions"]]
    raw["metrics"] = {"actor/pg_loss": result.loss, "actor/pg_clipfrac": result.metrics["clip_ratio/region_mean"],
                      "response_length/mean": float(np.mean(lengths)), "actor/grad_norm": 2.0,
                      "critic/score/mean": result.metrics["reward"], "actor/ppo_kl": 0.01}
    record = parse_record(raw)
    got = {c.key: c for c in record_checks.checks(record, recompute(record))}
    assert {"loss (logged as actor/pg_loss)", "clip_ratio/region_mean (logged as actor/pg_clipfrac)",
            "completions/mean_length (logged as response_length/mean)", "reward (logged as critic/score/mean)"} \
        == set(got) and all(c.ok for c in got.values())
    assert {u.key for u in record_checks.unchecked(record, recompute(record))} == {"actor/grad_norm", "actor/ppo_kl"}


def test_the_loss_checks_small_difference_is_explained_in_words(client, trl_id):
    soup = page(client, f"/walkthroughs/{trl_id}/steps/loss")
    row = next(tr for tr in soup.select("#record-checks tbody tr") if tr.th.get_text(strip=True) == "loss")
    assert "9.6e−09 of 0.8632" in row.get_text(" ", strip=True)
    why = next(li.get_text(" ", strip=True) for li in soup.select("#record-check-whys li") if li.code.get_text() == "loss")
    assert "float32 rounding" in why and "cancel" in why and "Σ|w·term| = 0.8632" in why and "9.6e−09 of it" in why
    assert row.select_one(".check-diff").get_text() == "8.2e−09"  # in the loss's own units


def test_the_inspector_says_what_its_count_is(client, unipo_id):
    per_completion = page(client, f"/walkthroughs/{unipo_id}/steps/group?node=advantages")
    stats = per_completion.select_one("#record-node .stats").get_text()
    assert stats.startswith("8 values (one per completion)") and "real tokens" not in stats
    scalar = page(client, f"/walkthroughs/{unipo_id}/steps/loss?node=output").select_one("#record-node .stats")
    assert scalar.get_text().startswith("1 value (the step's)")
    tokens = page(client, f"/walkthroughs/{unipo_id}/steps/ratio?node=ratio").select_one("#record-node .stats")
    assert tokens.get_text().startswith("116 values (one per real token)")


def _record(lengths_rewards: list[list[tuple[int, float]]]) -> dict:
    raw = make_record(seed=30, groups=len(lengths_rewards), size=len(lengths_rewards[0]), beta=0.0)
    for group, pairs in zip(raw["groups"], lengths_rewards, strict=True):
        for c, (n, reward) in zip(group["completions"], pairs, strict=True):
            for key in ("token_ids", "tokens", "logprobs", "old_logprobs", "ref_logprobs", "sampling_logprobs",
                        "entropy"):
                c[key] = (c[key] * n)[:n]
            c["rewards"] = {"accuracy": reward, "format": 0.0}
    return raw


def test_the_length_reward_sentence_names_r_and_agrees_with_its_means():
    """Simpson's case: across groups long completions earn less (group 0 is long and poor, group 1 short and
    rich), within each group the longer earn more. GRPO compares within groups: r = +1 (lengths and rewards
    on one line in each group), and the longer are the above-mean ones."""
    raw = _record([[(20, 0.0), (22, 0.2), (24, 0.4)], [(4, 0.6), (6, 0.8), (8, 1.0)]])
    record = parse_record(raw)
    finding = length_reward(record, recompute(record), lambda *a: "#")
    s = finding.sentence
    assert "the Pearson r between length (tokens) and reward is +1.00" in s and "Within each group" in s
    assert "above their group's mean reward average 16 tokens, those below 12" in s
    assert "longer completions earn more" in s
    pooled = np.corrcoef([20, 22, 24, 4, 6, 8], [0, 0.2, 0.4, 0.6, 0.8, 1.0])[0, 1]
    assert pooled < 0  # what the old sentence said: r over all completions, against its group means


def test_a_split_that_disagrees_with_r_says_so():
    """One group, rewards 0, 0.1, 1 with lengths 1, 20, 10: r > 0 (the longest is near the mean, the
    shortest is the poorest), but the one above the mean reward (10 tokens) is shorter than those below
    ((1 + 20) / 2 = 10.5): the sentence says the two point opposite ways instead of leaving it unexplained."""
    raw = _record([[(1, 0.0), (20, 0.1), (10, 1.0)]])
    record = parse_record(raw)
    s = length_reward(record, recompute(record), lambda *a: "#").sentence
    corr = np.corrcoef([1, 20, 10], [0.0, 0.1, 1.0])[0, 1]
    assert corr > 0 and f"is +{corr:.2f}" in s
    assert "average 10 tokens, those below 10.5" in s and "point opposite ways" in s


def test_a_trl_records_graph_has_the_records_own_node_words(client, trl_id):
    soup = page(client, f"/walkthroughs/{trl_id}/steps/group")
    graph = soup.select_one("#graph-stage").get_text(" ", strip=True)
    assert "Prompt features x" not in graph and "The recorded batch" in graph
    assert "KL per token D" in graph and "Reference divergence D" not in graph


def test_the_what_if_lists_the_conventions_it_changed(client, trl_id):
    soup = page(client, f"/walkthroughs/{trl_id}/steps/loss?preset=trl")
    rows = {tr.th.get_text(): [td.get_text() for td in tr.select("td")]
            for tr in soup.select("#record-what-if-conventions tbody tr")}
    assert rows == {"β": ["0.1", "0"], "advantages A": ["the framework's (recorded)", "from the rewards"]}
    head = soup.select_one(".record-conventions").get_text(" ", strip=True)
    assert "which changes β 0.1 → 0" in head


def test_a_what_if_without_a_preset_changes_only_its_fields(client, trl_id):
    soup = page(client, f"/walkthroughs/{trl_id}/steps/loss?loss_aggregation=sample_mean")
    rows = {tr.th.get_text(): [td.get_text() for td in tr.select("td")]
            for tr in soup.select("#record-what-if-conventions tbody tr")}
    assert rows["aggregation"] == ["token_mean", "sample_mean"] and "β" not in rows


def test_the_upload_page_opens_each_example(client):
    from app.kinds.step_record.examples import EXAMPLES

    soup = page(client, "/walkthroughs/new")
    forms = soup.select("#record-examples form")
    assert [f["action"] for f in forms] == [f"/walkthroughs/new/examples/{e.name}" for e in EXAMPLES]
    # the whole run's example is the runs' own section's, after the records' (tests/runs/test_run_pages.py)
    assert [f["action"] for f in soup.select("#run-examples form")] == ["/runs/examples/trl"]
    assert soup.find(id="upload-record-title").find_next(id="upload-run-title") is not None
    assert all(f["method"] == "post" for f in forms)
    assert [e.name for e in EXAMPLES] == ["trl", "verl", "unipo"]  # one of each framework the app reads
    for e in EXAMPLES:
        response = client.post(f"/walkthroughs/new/examples/{e.name}", follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"].endswith("/steps/group")
        page(client, response.headers["location"])
        record_id = response.headers["location"].split("/")[2]
        checks = client.get(f"/api/walkthroughs/{record_id}/step").json()["checks"]
        assert checks and all(c["ok"] for c in checks), (e.name, [c for c in checks if not c["ok"]])
    assert client.get("/walkthroughs/new/examples/trl").status_code in (404, 405)  # a GET starts nothing


def test_the_example_api_stores_an_example_as_an_upload(client):
    first = client.post("/api/walkthroughs/examples/unipo")
    assert first.status_code in (200, 201)
    again = client.post("/api/walkthroughs/examples/unipo")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert first.json()["id"] == upload(client, UNIPO.read_bytes())  # the same bytes, the same id
    assert client.post("/api/walkthroughs/examples/nope").status_code == 404


def test_the_record_api_sends_the_new_checks_and_summaries(client, unipo_id):
    body = client.get(f"/api/walkthroughs/{unipo_id}/step").json()
    keys = {c["key"] for c in body["checks"]}
    assert "clip_ratio/region_mean (logged as clip_fraction)" in keys and "advantage_std" in keys
    assert body["unchecked"] == [{"key": "learning_rate", "logged": 1e-06,
                                  "reason": "the optimizer's setting for the step, not computed from its tokens"}]
    assert body["metrics"]["completions/mean_length"] == 14.5
    assert all("diff" in c for c in body["checks"])
    json.dumps(body)


def test_python_m_app_open_lists_what_it_does_not_check(tmp_path, capsys, monkeypatch):
    from app.__main__ import main as app_main

    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert app_main(["open", str(TRL)]) == 0
    out = capsys.readouterr().out
    assert "--  grad_norm: not checked (‖∂loss/∂θ‖ over the model's weights" in out
    assert "--  learning_rate: not checked" in out


def test_the_strip_caption_says_what_a_cell_holds_for_this_group(client):
    """A short group (the verl example's completions: at most 8 tokens) is one partly filled cell a
    row: the caption says so, not "each cell 64 tokens ... its 256 tokens"; a long one keeps them."""
    location = client.post("/walkthroughs/new/examples/verl", follow_redirects=False).headers["location"]
    short = page(client, f"/walkthroughs/{location.split('/')[2]}/steps/ratio")
    caption = short.select_one("#record-tokens figcaption").get_text(" ")
    assert "one cell each (the longest completion is" in caption and "each cell 64 tokens" not in caption
    assert "its tokens below" in caption and "256" not in caption, caption
    long_id = upload(client, json.dumps(make_record(lengths=(280, 300))).encode())
    caption = page(client, f"/walkthroughs/{long_id}/steps/ratio").select_one("#record-tokens figcaption").get_text(" ")
    assert "each cell 64 tokens" in caption and "up to 256 of its tokens below" in caption, caption
