"""The shipped verl example (app/kinds/step_record/examples/verl-0.9.1-step-7.grpo-step.json, the upload
page's "Try an example") is what the verl recorder writes from a real verl 0.9.1 DataProto, now.

The batch is test_verl_recorder's: verl's own `compute_grpo_outcome_advantage` on 2 prompts x 4
responses, a tool-output token masked inside one response, ratios past the clip band and the dual
clip, vanilla loss with token-mean and a low_var_kl term (β 0.1), and the metrics verl's own loss
functions log for it. The token ids and log-probs are made up (no verl training run here: it needs Ray
and a rollout engine); the example's sentence says so.

UPDATE_VERL_EXAMPLE=1 rewrites the example from the recorder.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil

from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.checks import checks
from app.kinds.step_record.engine.step import recompute
from app.kinds.step_record.examples import BY_NAME
from app.kinds.step_record.recorders.verl import config_from_verl, write_step_record
from peers.test_verl_recorder import TOKENIZER, _batch, _configs, _verl_loss

EXAMPLE = BY_NAME["verl"].path


def test_the_shipped_verl_example_is_the_recorders_output_and_verl_agrees(tmp_path):
    data, logp, entropy = _batch(None)
    actor, algorithm = _configs("vanilla", "token-mean", True, None)
    loss, metrics, _grad = _verl_loss(data, logp, actor)
    written = tmp_path / "step-7.grpo-step.json"
    write_step_record(data, TOKENIZER, str(written), step=7, model="tiny (made-up log-probs)",
                      config=config_from_verl(actor, algorithm), log_probs=logp, entropy=entropy, metrics=metrics)
    if os.environ.get("UPDATE_VERL_EXAMPLE") == "1":
        shutil.copyfile(written, EXAMPLE)
    assert json.loads(EXAMPLE.read_bytes()) == json.loads(written.read_bytes()), (
        "the shipped verl example is not what the recorder writes now: UPDATE_VERL_EXAMPLE=1 make peers")
    record = parse_record(EXAMPLE.read_bytes(), str(EXAMPLE))
    assert record.run.framework == "verl" and record.config.beta > 0
    result = recompute(record)
    assert abs(result.loss - loss.item()) <= 1e-6 * max(abs(loss.item()), result.scale)
    found = {c.key.split(" ")[0]: c for c in checks(record, result)}
    assert "loss" in found and all(c.ok for c in found.values()), found
    assert metrics["actor/pg_clipfrac"] > 0 and metrics["actor/pg_clipfrac_lower"] > 0  # the clips bind
    assert pathlib.Path(EXAMPLE).stat().st_size <= 200_000
