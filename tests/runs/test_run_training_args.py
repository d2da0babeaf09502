"""A TRL output folder's only config, training_args.bin, kept with its run (issue 50): read as plain fields when the
folder is opened (domain/training_args.py: never unpickled as it is), stored beside the run's derived numbers
(domain/run_derived.py), and what compare says the runs differ in, with where it came from. Three runs with no
recorded step, whose GRPOConfigs differ in beta, epsilon and loss_type; a hostile file refused by name, running
nothing, the run opened all the same."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from compare_fixtures import run_document
from test_training_args import Boom, FakeGRPOConfig, saved

from app.__main__ import main as app_main
from app.runs.engine.run_opening import open_run_dir
from app.runs.views.run_compare import compare_url

CONFIGS = (dict(beta=0.04, epsilon=0.2, loss_type="dapo"), dict(beta=0.0, epsilon=0.28, loss_type="dr_grpo"),
           dict(beta=0.1, epsilon=0.2, loss_type="grpo"))


def write_folder(folder: Path, k: int, config: FakeGRPOConfig | None, checkpoint: bool = False) -> Path:
    """A TRL output folder as Trainer leaves it: trainer_state.json and training_args.bin, in the folder itself or
    (checkpoint=True) only in its checkpoint-40/."""
    where = folder / "checkpoint-40" if checkpoint else folder
    where.mkdir(parents=True, exist_ok=True)
    (where / "trainer_state.json").write_text(json.dumps(run_document(k)))
    if config is not None:
        (where / "training_args.bin").write_bytes(saved(config))
    return folder


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path / "data", follow_redirects=False)


def opened(client, folder: Path):
    app = client.app
    return open_run_dir(folder, app.state.run_store, app.state.catalog.uploads)


def test_runs_with_no_recorded_step_compare_by_their_training_args(client, tmp_path):
    ids = []
    for k, config in enumerate(CONFIGS):
        run = opened(client, write_folder(tmp_path / f"run-{k}", k, FakeGRPOConfig(output_dir=f"out-{k}", **config),
                                          checkpoint=k == 2))
        assert run.refused == ()
        ids.append(run.id)
    body = client.get(compare_url(ids, api=True)).json()
    differ = body["config"]["differ"]
    assert differ["beta"] == {"A": 0.04, "B": 0.0, "C": 0.1} and differ["epsilon"] == {"A": 0.2, "B": 0.28, "C": 0.2}
    assert differ["loss_type"] == {"A": "dapo", "B": "dr_grpo", "C": "grpo"}
    assert differ["output_dir"] == {"A": "out-0", "B": "out-1", "C": "out-2"}
    assert "num_generations" in body["config"]["same"] and "report_to" in body["config"]["same"]
    for r in body["runs"]:
        assert r["config_source"].startswith("from training_args.bin (FakeGRPOConfig); from trainer_state.json's")
    page = client.get(compare_url(ids)).text
    assert "from training_args.bin (FakeGRPOConfig)" in page and "β 0.04" in page


def test_the_config_outlives_the_folder_and_a_second_opening_keeps_it(client, tmp_path):
    folder = write_folder(tmp_path / "run", 0, FakeGRPOConfig(beta=0.3))
    first = opened(client, folder)
    (folder / "training_args.bin").unlink()
    assert opened(client, folder).id == first.id  # the same bytes: the same run, its kept config untouched
    shutil.rmtree(folder)
    kept = client.app.state.run_store.config(first.id)
    assert kept is not None and kept["fields"]["beta"] == 0.3 and kept["file"] == "training_args.bin"
    assert client.app.state.run_store.derived(first.id) == {}  # the config is not a step's numbers


def test_a_hostile_training_args_is_refused_by_name_and_runs_nothing(client, tmp_path, monkeypatch, capsys):
    target = tmp_path / "pwned"
    folder = write_folder(tmp_path / "run", 1, FakeGRPOConfig(output_dir=Boom(f"touch {target}")))
    run = opened(client, folder)
    assert not target.exists()
    ((where, why),) = run.refused
    assert where == str(folder / "training_args.bin") and "not read as a training config" in why
    assert "system" in why
    assert client.app.state.run_store.config(run.id) is None and client.get(f"/runs/{run.id}").status_code == 200
    # the command says so and exits 1, the run stored all the same (as for a refused step record)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    assert app_main(["open", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"{folder / 'training_args.bin'}: not read as a training config" in err
    assert not target.exists() and os.listdir(tmp_path).count("pwned") == 0


def test_an_uploaded_folder_keeps_its_training_args_too(client, tmp_path):
    from compare_fixtures import zipped

    folder = write_folder(tmp_path / "run", 0, FakeGRPOConfig(beta=0.2, loss_type="bnpo"))
    r = client.post("/api/runs", content=zipped(folder), headers={"content-type": "application/zip"})
    assert r.status_code == 201, r.text
    kept = client.app.state.run_store.config(r.json()["id"])
    assert kept is not None and kept["fields"]["beta"] == 0.2 and kept["fields"]["loss_type"] == "bnpo"
