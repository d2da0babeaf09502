"""The Inspector's meaning lines (app/views/inspector.py, templates/partials/inspector.html): the
node's name over its raw id, its formula filled with each sample's recorded numbers, the rewards
that feed the advantages, the choices named, and the markup static/js/linked.js links by."""
import json
import shutil

import pytest
from bs4 import BeautifulSoup
from snapshots import SEED_PATH, other_snapshot

from app.domain.snapshot import load_snapshot
from app.engine.grpo_step import run_grpo_step
from app.engine.params import GRPOParams
from app.views.inspector import build_inspector
from app.views.meaning import choice_label, filled_formula, node_meaning

SEED = load_snapshot(SEED_PATH)
PAGE = "/walkthroughs/toy_grpo/steps/{step}?node={node}"


@pytest.fixture(scope="module")
def run():
    return run_grpo_step(GRPOParams())


@pytest.fixture(scope="module")
def client(tmp_path_factory, make_client):
    folder = tmp_path_factory.mktemp("walkthroughs")
    shutil.copy(SEED_PATH, folder / SEED_PATH.name)
    (folder / "other.json").write_text(json.dumps(other_snapshot()))
    return make_client(walkthroughs_dir=folder)


def page(client, step: str, node: str) -> BeautifulSoup:
    r = client.get(PAGE.format(step=step, node=node.replace("@", "%40").replace("#", "%23")))
    assert r.status_code == 200, r.text
    return BeautifulSoup(r.text, "html.parser")


def test_view_model_carries_meaning_lines_and_labels(run):
    ratio = build_inspector(SEED, "ratio", run)
    assert ratio.meaning == node_meaning(SEED, "ratio")
    assert [f.text for f in ratio.filled] == [filled_formula(SEED, "ratio", run, i) for i in range(len(run.samples))]
    assert [f.clip_active for f in ratio.filled] == [s["clip_active"] for s in run.samples]
    assert ratio.choice_labels == tuple(choice_label(run.prompt, s["action"]) for s in run.samples)
    assert ratio.reward_inputs == ()
    adv = build_inspector(SEED, "advantages", run)
    assert adv.filled == ()  # mean(r) and std(r) are not recorded: nothing is filled in
    assert [(x.index, x.choice, x.reward) for x in adv.reward_inputs] == [
        (i, s["action"], s["reward"]) for i, s in enumerate(run.samples)]
    assert build_inspector(SEED, "input", run).filled == ()
    big = run_grpo_step(GRPOParams(group_size=100))
    assert len(build_inspector(SEED, "clipped", big).filled) == 64


def test_heading_is_the_name_with_the_raw_id_beneath(client):
    doc = page(client, "clip", "python@clipped#0")
    inspector = doc.select_one("#inspector")
    assert inspector.select_one("h3.node-title").get_text() == "The clipped-surrogate expression"
    code = inspector.select_one(".node-id code[data-node-title]")
    assert code["data-node-title"] == code.get_text() == "python@clipped#0"
    assert inspector.select_one(".meaning-summary").get_text() == node_meaning(SEED, "python@clipped#0").summary
    assert inspector.select_one(".formula code").get_text() == "L_i = min(ρ_i·A_i, clip(ρ_i, 1−ε, 1+ε)·A_i)"


def test_filled_lines_one_per_sample_with_clips_marked(client, run):
    doc = page(client, "clip", "clipped")
    lines = doc.select("#inspector ul.filled-formulas li[data-sample]")
    assert [int(li["data-sample"]) for li in lines] == list(range(len(run.samples)))
    for li, s in zip(lines, run.samples, strict=True):
        assert li.select_one("code").get_text() == filled_formula(SEED, "clipped", run, int(li["data-sample"]))
        assert int(li["data-choice"]) == s["action"]
        assert ("clip-active" in li.get("class", [])) == bool(li.select_one(".clip-mark")) == s["clip_active"]
    assert doc.select_one("#" + doc.select_one("ul.filled-formulas")["aria-labelledby"])


def test_advantages_show_their_input_rewards_first(client, run):
    doc = page(client, "advantages", "advantages")
    table = doc.select_one("#inspector table#advantage-inputs")
    assert "rewards r" in table.caption.get_text() and "reward rule" in table.caption.get_text()
    rows = table.select("tbody tr[data-sample]")
    assert [float(r.select_one(".num")["data-value"]) for r in rows] == [s["reward"] for s in run.samples]
    assert [r.select_one("td.choice").get_text() for r in rows] == [choice_label(run.prompt, s["action"])
                                                                     for s in run.samples]
    # before the advantages' own values
    order = [el for el in doc.select("#inspector table") if el.get("id") == "advantage-inputs"
             or el.get("data-tensor") == "values"]
    assert [el.get("id") or el["data-tensor"] for el in order] == ["advantage-inputs", "values"]
    assert not doc.select("#inspector ul.filled-formulas")


def test_group_table_names_the_choices_and_rows_are_focusable(client, run):
    doc = page(client, "clip", "clipped")
    rows = doc.select("#group-table tbody tr")
    assert len(rows) == len(run.samples)
    for i, (row, s) in enumerate(zip(rows, run.samples, strict=True)):
        assert row["data-sample"] == str(i) and row["data-choice"] == str(s["action"]) and row["tabindex"] == "0"
        assert row.select_one("td.choice").get_text() == choice_label(run.prompt, s["action"])
        assert len(row.find_all(["th", "td"])) == 10  # no column hidden


def test_charts_carry_the_link_attributes(client, run):
    doc = page(client, "clip", "advantages")
    adv = doc.select("#inspector .chart-advantages g.adv-bar[data-sample]")
    assert [g["data-sample"] for g in adv] == [str(i) for i in range(len(run.samples))]
    hits = doc.select("#inspector .chart-advantages rect.hit[tabindex='0']")
    assert [h["data-samples"] for h in hits] == [str(i) for i in range(len(run.samples))]
    assert all(choice_label(run.prompt, s["action"]) in h["aria-label"] for h, s in zip(hits, run.samples, strict=True))
    markers = doc.select("#inspector .chart-clip g.marker[data-samples]")
    assert sorted(int(m["data-samples"]) for m in markers) == list(range(len(run.samples)))
    clip_hits = doc.select("#inspector .chart-clip rect.hit[data-samples]")
    covered = sorted(int(i) for h in clip_hits for i in h["data-samples"].split())
    assert covered == list(range(len(run.samples)))  # one hit per drawn point, every sample in one
    probs = page(client, "policy", "policy.log_probabilities")
    rows = probs.select("#inspector .chart-probabilities g.prob-row[data-choice]")
    assert [r["data-choice"] for r in rows] == ["0", "1", "2", "3"]
    labels = [r.select_one("text.bar-label").get_text() for r in rows]
    assert labels == [choice_label(run.prompt, c) + (" ✓" if c == run.prompt.correct else "") for c in range(4)]
    assert [h["data-choice"] for h in probs.select("#inspector .chart-probabilities rect.hit")] == ["0", "1", "2", "3"]


def test_view_only_snapshot_inspector_names_nodes(client):
    r = client.get("/walkthroughs/other/steps/second")
    doc = BeautifulSoup(r.text, "html.parser")
    assert doc.select_one("#inspector h3.node-title").get_text() == "Linear 5→2"
    assert doc.select_one("#inspector .node-id code").get_text() == "block<b>.fc"
    assert not doc.select("#inspector ul.filled-formulas, #group-table")


def test_a_stage_table_names_the_choices(client):
    r = client.get("/walkthroughs/toy_grpo/steps/policy?process=r1&stage=cold-start&node=policy.log_probabilities")
    assert r.status_code == 200, r.text
    doc = BeautifulSoup(r.text, "html.parser")
    rows = doc.select("#stage-samples tbody tr[data-sample]")
    assert rows and all(row["tabindex"] == "0" for row in rows)
    cells = [row.select_one("td.choice").get_text() for row in rows]
    assert all(" · " in c for c in cells) and "2 · readable correct" in cells  # prompt 0's correct choice
