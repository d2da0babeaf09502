"""A run's recorded steps (issue 34): the recorder's step records beside a run directory (step-records/ or
records/) stored as uploads, linked to their steps, one click from the explorer. The shipped example is a real
TRL 1.16 run: each of its four records carries the metrics TRL logged at that step, key for key equal to
trainer_state.json's, and every one the app recomputes agrees (reward_std included: TRL >= 0.27 logs the batch's
std, older TRL the mean of the groups', checked here in float64 against both)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from bs4 import BeautifulSoup
from run_fixtures import healthy

from app.__main__ import main as app_main
from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.checks import checks
from app.kinds.step_record.engine.step import recompute
from app.runs.domain.run_dir import find_step_records, run_root
from app.runs.examples import RUN_DIR

STEPS = (30, 60, 90, 120)
LOGGED = {e["step"]: e for e in json.loads((RUN_DIR / "trainer_state.json").read_text())["log_history"] if "loss" in e}


def record_bytes(step: int) -> bytes:
    return (RUN_DIR / "records" / f"step-{step}.grpo-step.json").read_bytes()


@pytest.mark.parametrize("step", STEPS)
def test_each_recorded_step_is_what_trl_logged_there_and_every_check_passes(step):
    record = parse_record(record_bytes(step), f"step-{step}")
    assert record.run.framework == "trl" and record.run.framework_version == "1.16.0" and record.run.step == step
    assert record.metrics and all(LOGGED[step][k] == v for k, v in record.metrics.items())
    found = checks(record, recompute(record))
    assert len(found) >= 18 and all(c.ok for c in found), [c for c in found if not c.ok]


def test_reward_std_follows_the_trl_version_that_logged_it():
    doc = json.loads(record_bytes(30))
    rewards = [np.asarray([c["reward"] for c in g["completions"]], dtype=np.float64) for g in doc["groups"]]
    batch_std = np.concatenate(rewards).std(ddof=1)
    group_mean = np.mean([r.std(ddof=1) for r in rewards])
    assert abs(batch_std - group_mean) > 0.05  # a step where the two conventions differ
    assert LOGGED[30]["reward_std"] == pytest.approx(batch_std, rel=1e-6)
    assert recompute(parse_record(doc, "1.16"))  # sanity: parses as it is
    for version, expected in (("1.16.0", batch_std), ("0.27.0", batch_std), ("0.26.2", group_mean),
                              ("0.19.1", group_mean), ("main", batch_std)):
        doc["run"]["framework_version"] = version
        record = parse_record(doc, version)
        check = next(c for c in checks(record, recompute(record)) if c.key == "reward_std")
        assert check.recomputed == pytest.approx(expected, rel=1e-12), version


def test_records_are_found_beside_the_run_and_a_checkpoint_hangs_off_its_output_directory(tmp_path):
    (tmp_path / "step-records").mkdir()
    (tmp_path / "records").mkdir()
    (tmp_path / "step-records" / "step-2.grpo-step.json").write_text("{}")
    (tmp_path / "records" / "step-1.grpo-step.json").write_text("{}")
    (tmp_path / "records" / "notes.json").write_text("{}")
    assert [p.name for p in find_step_records(tmp_path)] == ["step-2.grpo-step.json", "step-1.grpo-step.json"]
    state = tmp_path / "checkpoint-40" / "trainer_state.json"
    assert run_root(tmp_path, state) == tmp_path
    assert run_root(state, state) == tmp_path
    assert run_root(tmp_path / "trainer_state.json", tmp_path / "trainer_state.json") == tmp_path


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


def soup(r):
    assert r.status_code == 200, r.text[:400]
    return BeautifulSoup(r.text, "html.parser")


def test_the_explorer_links_each_recorded_step_to_its_walkthrough(client):
    url = client.post("/runs/examples/trl").headers["location"]
    page = soup(client.get(url))
    links = page.select("#run-recorded a.run-record-link")
    assert [a.string for a in links] == [f"Step {s}’s tokens" for s in STEPS]
    for step, a in zip(STEPS, links, strict=True):
        home = client.get(a["href"])
        assert home.status_code == 303
        record_id = a["href"].split("/")[2]
        assert client.get(f"/api/walkthroughs/{record_id}/step").json()["checks"]
        steps = client.get(f"/api/walkthroughs/{record_id}").json()
        assert str(step) in json.dumps(steps)  # the record of that step
    kl = page.select_one("figure[data-metric='kl']")
    assert [m["aria-label"].split(":")[0] for m in kl.select("a.run-mark.is-recorded")] == [f"step {s}" for s in STEPS]
    at = soup(client.get(url + "?step=60"))
    assert at.select_one(".run-step-record a.btn")["href"] == links[1]["href"]
    between = soup(client.get(url + "?step=45"))
    assert [a.string for a in between.select(".run-step-record a")] == ["step 30", "step 60"]
    body = client.get("/api" + url).json()
    assert [r["step"] for r in body["recorded"]] == list(STEPS)
    assert [r["url"] for r in body["recorded"]] == [a["href"] for a in links]


def test_a_run_with_no_record_says_how_to_record_one(client):
    ident, _ = client.app.state.run_store.add(json.dumps(healthy(10)).encode())
    page = soup(client.get(f"/runs/{ident}"))
    assert not page.select(".run-record-link") and "record_steps" in page.select_one("#run-recorded").text
    assert client.get(f"/api/runs/{ident}").json()["recorded"] == []


def test_open_links_the_good_records_names_the_bad_and_adds_more_later(tmp_path, capsys, monkeypatch, make_client):
    data = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(data))
    run = tmp_path / "out"
    (run / "step-records").mkdir(parents=True)
    shutil.copyfile(RUN_DIR / "trainer_state.json", run / "trainer_state.json")
    shutil.copyfile(RUN_DIR / "records" / "step-30.grpo-step.json", run / "step-records" / "step-30.grpo-step.json")
    broken = json.loads(record_bytes(60))
    broken["groups"][1]["completions"][2]["reward"] = "lots"
    (run / "step-records" / "step-60.grpo-step.json").write_text(json.dumps(broken))
    assert app_main(["open", str(run)]) == 1  # the run and step 30 are stored all the same
    out, err = capsys.readouterr()
    assert "recorded step 30: stored as" in out and "  ok  reward_std: logged 0.417261" in out
    assert f"{run / 'step-records' / 'step-60.grpo-step.json'}: refused (422):" in err
    assert "groups[1].completions[2].reward" in err
    ident = out.splitlines()[0].split()[2].rstrip(":")
    client = make_client(data_dir=data, follow_redirects=False)
    assert [r["step"] for r in client.get(f"/api/runs/{ident}").json()["recorded"]] == [30]
    (run / "step-records" / "step-60.grpo-step.json").unlink()
    shutil.copyfile(RUN_DIR / "records" / "step-90.grpo-step.json", run / "step-records" / "step-90.grpo-step.json")
    assert app_main(["open", str(run)]) == 0
    assert "already stored run " + ident in capsys.readouterr().out
    assert [r["step"] for r in client.get(f"/api/runs/{ident}").json()["recorded"]] == [30, 90]  # the map grows
