"""verl's own rollout dump read by the app (issue 34): verl 0.9.1's `RayPPOTrainer._write_generations` (the function
`trainer.rollout_data_dir` calls, verl/trainer/ppo/ray_trainer.py) writes `{step}.jsonl` files, called here, not
re-typed; the app's reader (app/runs/domain/verl_rollouts.py) reads them into per-step numbers equal to
a float64 computation over the lists verl was given (tests/runs/rollout_fixtures.py's `expected`)."""
from __future__ import annotations

import importlib.util
import math
import pathlib

import numpy as np
import pytest
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from app.runs.domain.verl_rollouts import read_rollouts_dir

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _fixtures():
    spec = importlib.util.spec_from_file_location(
        "verl_rollout_fixtures", ROOT / "tests" / "runs" / "rollout_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.expected, module.batch


def test_verls_own_dump_reads_as_float64_says(tmp_path):
    expected, batch = _fixtures()
    rng = np.random.default_rng(11)
    want = {}
    for step in (1, 2, 12):
        inputs, outputs, scores = batch(rng, prompts=6, n=8, tie=(1, 4))
        if step == 12:
            scores[0] = math.nan
        extra = {"acc": [float(s > 0.5) for s in scores], "pred": ["42"] * len(scores),
                 "request_id": [f"req-{i}" for i in range(len(scores))], "short": [1.0]}  # short: not dumped by verl
        RayPPOTrainer._write_generations(inputs, outputs, [{"answer": "4"}] * len(scores), scores, extra,
                                         str(tmp_path / "rollout_data_dir"), step)
        want[step] = expected(inputs, outputs, scores, {"acc": extra["acc"]})
    got = read_rollouts_dir(tmp_path)
    assert got.files == 3 and not got.refused
    for step, values in want.items():
        assert set(got.metrics[step]) == set(values), step
        for name, value in values.items():
            assert got.metrics[step][name] == pytest.approx(value, rel=1e-12, abs=1e-15), (step, name)
