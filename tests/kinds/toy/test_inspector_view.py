"""The Inspector's meaning lines (app/views/inspector.py, templates/partials/inspector.html): the
node's name over its raw id, its formula filled with each sample's recorded numbers, the rewards
that feed the advantages, the choices named, and the markup static/js/linked.js links by."""
import json
import shutil

import pytest
from bs4 import BeautifulSoup
from runs import start_default_runs
from snapshots import SEED_PATH, other_snapshot

from app.domain.snapshot import load_snapshot
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.step import run_grpo_step
from app.kinds.toy.views.inspector import build_toy_inspector as build_inspector
from app.kinds.toy.views.meaning import choice_label, filled_formula
from app.views.meaning import node_meaning

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
    client = make_client(walkthroughs_dir=folder)
    start_default_runs(client.app)  # as `python -m app` does at start-up: the default paths' pages open
    return client


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
    rows = doc.select("#group-table-full tbody tr")
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
    assert not doc.select("#inspector ul.filled-formulas, #group-table, #group-table-full, [data-step-focus]")


def test_a_stage_table_names_the_choices(client):
    r = client.get("/walkthroughs/toy_grpo/steps/policy?process=r1&stage=cold-start&node=policy.log_probabilities")
    assert r.status_code == 200, r.text
    doc = BeautifulSoup(r.text, "html.parser")
    rows = doc.select("#stage-samples tbody tr[data-sample]")
    assert rows and all(row["tabindex"] == "0" for row in rows)
    cells = [row.select_one("td.choice").get_text() for row in rows]
    assert all(" · " in c for c in cells) and "2 · readable correct" in cells  # prompt 0's correct choice


# ------------------------------------------------------------------ the conventions in the group table
# (app/views/sample_table.py: a column shows only where it carries information)

DEFAULT_COLUMNS = ["reward", "advantage", "ratio", "clipped", "divergence", "objective", "ratio_grad", "clip"]


def table_of(**params):
    from app.kinds.toy.views.sample_table import build_sample_table
    return build_sample_table(run_grpo_step(GRPOParams(**params)))


def keys(table) -> list[str]:
    return [c.key for c in table.columns]


def test_the_papers_table_keeps_its_columns():
    table = table_of()
    assert keys(table) == DEFAULT_COLUMNS
    assert table.columns[1].sub == "÷ population std" and table.columns[4].sub == "k3"
    assert table.conventions == "Conventions: DeepSeekMath paper."
    assert "population std + 0.0001" in table.in_force and "w = 1/G = 0.125" in table.in_force


def test_each_convention_adds_only_its_own_columns():
    trl = table_of(preset="trl", beta=0.04)
    assert keys(trl) == ["reward", "advantage", "ratio", "clipped", "divergence", "kl_rho_factor", "kl_used",
                         "objective", "weight", "ratio_grad", "clip"]
    assert trl.columns[1].sub == "÷ sample std" and trl.conventions == (
        "Conventions: TRL 1.16 defaults (β overridden to 0.04).")
    assert "× ρ" in trl.in_force and "token_mean" in trl.in_force
    reward = table_of(kl_placement="reward")
    assert keys(reward) == ["reward", "reward_used", "advantage", "ratio", "clipped", "divergence", "objective",
                            "ratio_grad", "clip"]
    assert reward.columns[5].sub == "k3 of π_old, in the reward" and "in the reward" in reward.in_force
    verl = table_of(preset="verl")
    assert keys(verl) == ["reward", "advantage", "ratio", "clipped", "divergence", "objective", "weight",
                          "ratio_grad", "clip", "clamps"]
    assert verl.columns[-2].header == "clip / dual clip" and verl.columns[3].sub == "floor 3·A if A < 0"
    assert table_of(preset="dr_grpo").columns[1].sub == "no ÷ std"
    several = table_of(preset="trl", beta=0.04, kl_estimator="k2")
    assert several.conventions == "Conventions: TRL 1.16 defaults (β overridden to 0.04, KL estimator to k2)."


def test_flags_are_words_not_colour():
    dual = table_of(**{"seed": 0, "beta": 0.5, "learning_rate": 1, "inner_step": 2, "dual_clip": 1.01})
    clip = keys(dual).index("clip")
    hits = [r for r in dual.rows if r.cells[clip].text.startswith("⌊ dual clip")]
    assert hits, "the dual clip binds for some sample here"
    grad = keys(dual).index("ratio_grad")
    assert all(r.cells[grad].text == "(saturated)" for r in hits)
    clamps = table_of(log_ratio_clamp=0.1, kl_clamp=0.05)
    column = keys(clamps).index("clamps")
    texts = {r.cells[column].text for r in clamps.rows}
    assert texts and all(t.startswith("⇥ ") and t.endswith(" clamped") for t in texts), texts
    assert any("ρ" in t for t in texts)


def test_page_shows_the_conventions_next_to_the_loss(client):
    r = client.get("/walkthroughs/toy_grpo/steps/clip?node=output&preset=trl&beta=0.04")
    assert r.status_code == 200, r.text
    doc = BeautifulSoup(r.text, "html.parser")
    line = doc.select_one("#inspector #conventions-line")
    assert line.get_text() == "Conventions: TRL 1.16 defaults (β overridden to 0.04)."
    history = line.find_previous_sibling("p")
    assert "loss = −J" in history.get_text()  # right under the loss
    heads = [th["data-column"] for th in doc.select("#group-table-full thead th[data-column]")]
    assert "kl_rho_factor" in heads and "kl_used" in heads and "weight" in heads
    assert doc.select_one("#inspector .meaning-note").get_text().startswith("Each completion is one token long")
    formula = doc.select_one("#inspector .formula code").get_text()
    assert formula == "loss = −J = −Σ_i w_i·(L_i − β·ρ_i·D_i), w_i = 1/Σ_j |o_j| = 1/G"
    rows = doc.select("#group-table-full tbody tr")
    api = client.get("/api/walkthroughs/toy_grpo/step", params={"preset": "trl", "beta": 0.04}).json()
    for row, sample in zip(rows, api["samples"], strict=True):
        cells = [float(c["data-value"]) for c in row.select(".num")]
        assert cells == [sample[k] for k in ("reward", "advantage", "ratio", "clipped", "divergence",
                                             "kl_rho_factor", "kl_used", "objective", "weight", "ratio_grad")]


def test_default_page_has_no_new_columns(client):
    doc = page(client, "clip", "clipped")
    assert [th["data-column"] for th in doc.select("#group-table-full thead th[data-column]")] == DEFAULT_COLUMNS
    assert doc.select_one("#conventions-line").get_text() == "Conventions: DeepSeekMath paper."


def test_a_clipped_sample_under_trls_kl_times_rho_is_not_called_saturated():
    table = table_of(preset="trl", beta=0.04)
    grad = keys(table).index("ratio_grad")
    clipped = [r for r in table.rows if r.clip_active]
    assert clipped and all(r.cells[grad].text == "(KL × ρ only)" and r.cells[grad].value != 0 for r in clipped)
    assert "only the KL × ρ term's gradient is left" in table.caption
    assert "exactly 0" in table_of().caption and "dual clip" in table_of(preset="verl").caption
