"""`python -m app findings RUN`: a TRL output directory's newest trainer_state.json, its findings said with their
steps; --json the same as one object; a refused file names its JSON path (exit 1), a missing one exit 2."""
from __future__ import annotations

import json

from run_fixtures import healthy

from app.__main__ import main as app_main


def write_run(folder, document, checkpoint=None):
    where = folder / f"checkpoint-{checkpoint}" if checkpoint is not None else folder
    where.mkdir(parents=True, exist_ok=True)
    (where / "trainer_state.json").write_text(json.dumps(document))
    return where


def test_the_newest_checkpoint_is_read_and_its_findings_are_printed(tmp_path, capsys):
    older = healthy(10)
    newer = healthy(30)
    for e in newer["log_history"][:-1]:
        e["clip_ratio/region_mean"] = 0.0  # no clipping at any step
    write_run(tmp_path, older, checkpoint=9)
    write_run(tmp_path, newer, checkpoint=30)
    write_run(tmp_path, older, checkpoint=100).joinpath("trainer_state.json").unlink()  # no state there: skipped
    assert app_main(["findings", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(str(tmp_path / "checkpoint-30" / "trainer_state.json"))
    assert "30 logged steps (1 to 30)" in out[0] and "322 s of training" in out[0]
    assert any(line.startswith("- [clip_never] The clip ratio") and line.endswith("(steps 1, 30)") for line in out)


def test_json_output_and_a_run_no_rule_speaks_of(tmp_path, capsys):
    write_run(tmp_path, healthy(20))
    assert app_main(["findings", str(tmp_path / "trainer_state.json")]) == 0
    assert "no finding" in capsys.readouterr().out
    assert app_main(["findings", str(tmp_path), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["steps"] == list(range(1, 21)) and body["findings"] == [] and "kl" in body["metrics"]


def test_a_refused_or_missing_run_says_why(tmp_path, capsys):
    document = healthy(5)
    document["log_history"][2]["kl"] = "high"
    write_run(tmp_path, document)
    assert app_main(["findings", str(tmp_path)]) == 1
    assert "log_history[2].kl: expected a number, got a string" in capsys.readouterr().err
    assert app_main(["findings", str(tmp_path / "nowhere")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert app_main(["findings", str(empty)]) == 2
    assert "no trainer_state.json here or in a checkpoint-N/ folder" in capsys.readouterr().err


def test_open_stores_a_run_directory_for_the_server_and_prints_its_link(tmp_path, capsys, monkeypatch, make_client):
    data = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(data))
    run = tmp_path / "out"
    document = healthy(25)
    for e in document["log_history"][:-1]:
        e["clip_ratio/region_mean"] = 0.0
    write_run(run, document, checkpoint=25)
    assert app_main(["open", str(run), "--port", "8123"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("stored run ") and "25 logged steps" in out[0]
    assert any(line.startswith("- [clip_never]") for line in out)
    url = out[-1].removeprefix("open http://127.0.0.1:8123")
    assert url.startswith("/runs/")
    assert app_main(["open", str(run / "checkpoint-25" / "trainer_state.json")]) == 0
    assert capsys.readouterr().out.startswith("already stored run " + url.removeprefix("/runs/"))
    page = make_client(data_dir=data).get(url)  # the server on the same data directory opens it
    assert page.status_code == 200 and "A GRPO run: 25 logged steps" in page.text


def test_open_refuses_a_bad_run_by_its_path_and_stores_nothing(tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(data))
    document = healthy(5)
    document["log_history"][3]["loss"] = [1]
    write_run(tmp_path / "out", document)
    assert app_main(["open", str(tmp_path / "out")]) == 1
    assert "log_history[3].loss: expected a number, got a list" in capsys.readouterr().err
    assert not (data / "runs").exists() or not list((data / "runs").iterdir())
    assert app_main(["open", str(tmp_path / "nowhere" / "trainer_state.json")]) == 2
