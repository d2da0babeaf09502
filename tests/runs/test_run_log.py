"""TRL's trainer_state.json read as a run (app/runs/domain/run_log.py): every logged metric of every
step equals the file's, one step's entries merged, the closing entry apart; bad input refused by JSON path."""
from __future__ import annotations

import json
import math

import pytest
from run_fixtures import closing, entry, healthy, state

from app.runs.domain.run_log import RunLogError, read_trainer_state


def test_every_logged_metric_of_every_step_equals_the_file():
    document = healthy(30)
    log = read_trainer_state(json.dumps(document).encode())
    entries = document["log_history"][:-1]
    assert log.steps == tuple(e["step"] for e in entries)
    for name in entries[0]:
        if name == "step":
            continue
        assert log.series(name) == tuple((e["step"], float(e[name])) for e in entries), name
    assert log.summary["train_runtime"] == 321.5 and "train_runtime" not in log.metrics
    assert log.global_step == 30 and log.logging_steps == 1


def test_an_eval_entry_merges_into_its_step_and_a_metric_missing_at_a_step_is_none():
    document = state([entry(1), entry(2), {"step": 2, "eval_loss": 0.7, "epoch": 0.002}, entry(3)])
    del document["log_history"][2 - 1]["kl"]  # step 2 logged no kl
    log = read_trainer_state(document)
    assert log.steps == (1, 2, 3)
    assert log.metrics["eval_loss"] == (None, 0.7, None)
    assert log.metrics["kl"] == (0.01, None, 0.01) and log.series("kl") == ((1, 0.01), (3, 0.01))


def test_nan_and_infinity_are_kept_as_logged():
    log = read_trainer_state('{"log_history": [{"step": 1, "loss": NaN, "kl": Infinity}]}')
    assert math.isnan(log.metrics["loss"][0]) and log.metrics["kl"][0] == math.inf
    assert log.summary == {} and log.global_step is None


@pytest.mark.parametrize(("document", "path", "words"), [
    ([], "$", "expected an object"),
    ({}, "log_history", "missing"),
    ({"log_history": {"step": 1}}, "log_history", "expected a list"),
    ({"log_history": [3]}, "log_history[0]", "expected an object"),
    ({"log_history": [{"loss": 1.0}]}, "log_history[0].step", "missing"),
    ({"log_history": [{"step": -1}]}, "log_history[0].step", "non-negative integer"),
    ({"log_history": [{"step": 1.5}]}, "log_history[0].step", "non-negative integer"),
    ({"log_history": [{"step": True}]}, "log_history[0].step", "non-negative integer"),
    ({"log_history": [{"step": 4}, {"step": 2}]}, "log_history[1].step", "2 after 4"),
    ({"log_history": [{"step": 1, "loss": "0.5"}]}, "log_history[0].loss", "got a string"),
    ({"log_history": [{"step": 1, "clip_ratio/low_mean": None}]}, 'log_history[0]["clip_ratio/low_mean"]', "got null"),
    ({"log_history": [{"step": 1, "kl": [0.1]}]}, "log_history[0].kl", "got a list"),
    ({"log_history": [{"step": 1, "kl": 0.1}, {"step": 1, "kl": 0.2}]}, "log_history[1].kl", "disagrees"),
    ({"log_history": [], "global_step": "9"}, "global_step", "expected an integer"),
])
def test_bad_input_is_refused_by_path(document, path, words):
    with pytest.raises(RunLogError) as refused:
        read_trainer_state(document)
    assert (refused.value.path or "$") == path and words in refused.value.message


def test_text_that_is_not_json_is_refused():
    with pytest.raises(RunLogError, match="not JSON"):
        read_trainer_state(b"{log_history: [")


def test_a_closing_entry_alone_is_a_run_of_no_steps():
    log = read_trainer_state(state([closing(0)], close=False))
    assert log.steps == () and log.metrics == {} and log.summary["train_loss"] == 0.02
