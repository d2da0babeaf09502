"""A directory of step records and nothing else opened as a run (issue 34): the verl snippet's records/, or the
recorder's step-records/ with no trainer_state.json and no rollout dumps. The run's log is the records' own
metrics at their steps (the command says so), every record linked; a broken record is named and the rest opened;
a directory with nothing readable is refused with what was looked for."""
from __future__ import annotations

import json
import shutil

from bs4 import BeautifulSoup

from app.__main__ import main as app_main
from app.kinds.step_record.examples import HERE
from app.runs.examples import RUN_DIR

VERL = HERE / "verl-0.9.1-step-7.grpo-step.json"
PORT = "8126"


def records_dir(root, folder="records"):
    where = root / folder
    where.mkdir(parents=True)
    for record in sorted((RUN_DIR / "records").glob("*.grpo-step.json")):
        shutil.copy(record, where / record.name)
    shutil.copy(VERL, where / VERL.name)
    return where


def expected(folder) -> dict[str, dict[int, float]]:
    """Each record's metrics at its step, by json.load."""
    out: dict[str, dict[int, float]] = {}
    for path in sorted(folder.glob("*.grpo-step.json")):
        doc = json.loads(path.read_text())
        for name, value in doc.get("metrics", {}).items():
            if value is not None:
                out.setdefault(name, {})[doc["run"]["step"]] = float(value)
    return out


def opened(capsys, path, code=0):
    assert app_main(["open", str(path), "--port", PORT]) == code
    out, err = capsys.readouterr()
    return out.splitlines(), err, out.splitlines()[-1].removeprefix(f"open http://127.0.0.1:{PORT}") if out else ""


def test_the_records_metrics_are_the_run_and_every_record_is_linked(tmp_path, capsys, monkeypatch, make_client):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    folder = records_dir(tmp_path / "out", "step-records")
    lines, err, url = opened(capsys, tmp_path / "out")
    assert err == "" and lines[0].startswith("stored run ") and "5 logged steps (7 to 120)" in lines[0]
    assert lines[1].startswith("no trainer log: the run's metrics are the step records' own metrics")
    assert [line.split(":")[0] for line in lines if line.startswith("recorded step")] == [
        f"recorded step {s}" for s in (7, 30, 60, 90, 120)]
    client = make_client(data_dir=tmp_path / "data")
    api = client.get("/api" + url).json()
    want = expected(folder)
    assert set(api["metrics"]) == set(want)
    for name, by_step in want.items():
        assert {s: v for s, v in api["metrics"][name]["points"]} == by_step, name
    assert [r["step"] for r in api["recorded"]] == [7, 30, 60, 90, 120]
    page = client.get(url + "?step=60")
    soup = BeautifulSoup(page.text, "html.parser")
    assert page.status_code == 200 and soup.h1.get_text(strip=True) == "A GRPO run: 5 logged steps"
    assert len(soup.select(".run-record-link")) == 5 and soup.select_one(".run-step-record a.primary") is not None
    # the records folder itself opens as the same run (the same metrics: the same stored file)
    again, _, same = opened(capsys, folder)
    assert again[0].startswith("already stored run ") and same == url


def test_a_broken_record_is_named_and_a_directory_with_nothing_readable_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    folder = records_dir(tmp_path / "out")
    (folder / "step-45.grpo-step.json").write_text('{"format": "grpo.step-record", "version": 1}')
    lines, err, _ = opened(capsys, tmp_path / "out", code=1)
    assert "5 logged steps" in lines[0] and f"error: {folder / 'step-45.grpo-step.json'}: refused (422)" in err
    lonely = tmp_path / "lonely" / "records"
    lonely.mkdir(parents=True)
    (lonely / "step-1.grpo-step.json").write_text("not json")
    _, err, _ = opened(capsys, tmp_path / "lonely", code=2)
    assert "no step record here could be read (1 refused)" in err and "step-1.grpo-step.json" in err
    (tmp_path / "empty").mkdir()
    _, err, _ = opened(capsys, tmp_path / "empty", code=2)
    assert "nothing here opens as a run. Looked for: trainer_state.json here or in a checkpoint-N/ folder" in err
    assert "a UNIPO canonical file" in err and "step records (*.grpo-step.json in step-records/, records/" in err
