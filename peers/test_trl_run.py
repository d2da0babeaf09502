"""A whole TRL run (issue 34), opened as the app opens one: a real TRL 1.16 GRPO run on CPU (the tiny Llama and
byte-level BPE tokenizer of peers/test_trl_recorder.py, nothing downloaded), 12 optimizer steps, logging_steps=1,
log_completions=True, the recorder's record_every=3, trainer.save_state() at the end.

- open_run_dir (the real run store and upload store on a temporary DATA_DIR): every metric of every logged step
  equals trainer_state.json's log_history exactly (NaN == NaN); steps 3, 6, 9 and 12 are linked, and every
  check of each linked record passes.
- read_completions_dir on TRL's own completions/*.parquet: one file per logged step; each step's samples/…
  numbers equal pandas in float64; and, since here every step scores exactly one generation batch
  (steps_per_generation = gradient_accumulation_steps = 1, num_iterations = 1) of generation_batch_size rows, the
  file holds the very rows TRL's logged `reward`, `reward_std` and `rewards/<func>/mean|std` are computed from:
  those equal the table's to 1e-6 relative (TRL computes them in float32; the table holds the float32 values).
"""
from __future__ import annotations

import math
import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from app.domain.uploads import UploadStore  # noqa: E402
from app.house import registry  # noqa: E402
from app.kinds.step_record.engine.checks import checks  # noqa: E402
from app.kinds.step_record.engine.step import recompute  # noqa: E402
from app.kinds.step_record.recorders.trl import RecordingGRPOTrainer  # noqa: E402
from app.runs.domain.run_log import SUMMARY_KEYS  # noqa: E402
from app.runs.domain.run_store import RunStore  # noqa: E402
from app.runs.domain.trl_completions import read_completions_dir  # noqa: E402
from app.runs.engine.run_opening import open_run_dir  # noqa: E402
from peers.local_tokenizer import CORPUS, bpe_tokenizer  # noqa: E402

STEPS, EVERY = 12, 3
RECORDED = [3, 6, 9, 12]
PROMPTS = ["ab ba", "cab", "dab ab", "bad", "abba", "dad"]
FUNCS = ("ends", "count_a")
DERIVED = ("samples/", "tokens/")  # numbers the app derives from a run's other files and joins to its log
TOKENIZER = bpe_tokenizer(CORPUS)


def ends(completions, completion_ids, **kwargs):
    return [1.0 if TOKENIZER.eos_token_id in ids else 0.0 for ids in completion_ids]


def count_a(completions, **kwargs):
    return [text.count("a") / 4 for text in completions]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(TOKENIZER), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=TOKENIZER.pad_token_id, eos_token_id=TOKENIZER.eos_token_id, bos_token_id=None)
    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def trainer(model_dir, tmp_path_factory) -> RecordingGRPOTrainer:
    out = tmp_path_factory.mktemp("trl-run") / "run"
    args = GRPOConfig(output_dir=str(out), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                      logging_steps=1, disable_tqdm=True, seed=0, per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, max_steps=STEPS, beta=0.04, learning_rate=0.01,
                      log_completions=True, num_completions_to_print=1)
    t = RecordingGRPOTrainer(model=model_dir, args=args, reward_funcs=[ends, count_a],
                             train_dataset=Dataset.from_dict({"prompt": PROMPTS}), processing_class=TOKENIZER,
                             record_every=EVERY)  # record_dir: the default, OUTPUT_DIR/step-records
    t.train()
    t.save_state()
    return t


@pytest.fixture(scope="module")
def opened(trainer, tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    kinds = registry()
    uploads = UploadStore.open(data, None, quota_mb=512, cache_mb=0)  # as `python -m app open` builds it
    uploads.classify, uploads.readers = kinds.classify, kinds.readers
    try:
        yield open_run_dir(pathlib.Path(trainer.args.output_dir), RunStore(data / "runs"), uploads)
    finally:
        uploads.close()


def history(trainer) -> list[dict]:
    return [e for e in trainer.state.log_history if not SUMMARY_KEYS & e.keys()]


def test_record_every_wants_every_nth_step_and_is_exclusive_with_record_steps(model_dir):
    for kwargs in ({}, {"record_steps": [3], "record_every": 3}, {"record_every": 0}, {"record_every": True},
                   {"record_every": 2.5}):
        with pytest.raises(ValueError, match="record_every|record_steps"):
            RecordingGRPOTrainer(model=model_dir, **kwargs)
    recorder = object.__new__(RecordingGRPOTrainer)  # _records alone: no model, no TRL set-up
    recorder.record_every, recorder.record_steps = 3, None
    recorder.state = type("State", (), {"max_steps": 10})()
    assert [s for s in range(1, 13) if recorder._records(s)] == [3, 6, 9, 12]
    # ahead: a batch scored for step s may serve later steps; some wanted step >= s must lie within max_steps
    assert [s for s in range(1, 13) if recorder._records(s, ahead=True)] == list(range(1, 10))
    recorder.state.max_steps = 0  # before training: the count is unknown, so every step may lead to one
    assert all(recorder._records(s, ahead=True) for s in range(1, 100))


def test_the_recorder_wrote_every_third_step(trainer):
    assert sorted(trainer.step_records) == RECORDED
    for step, path in trainer.step_records.items():
        assert pathlib.Path(path) == pathlib.Path(trainer.args.output_dir) / "step-records" / \
            f"step-{step}.grpo-step.json"


def test_the_opened_run_is_trainer_states_log_and_links_the_recorded_steps(trainer, opened):
    log, train = opened.log, history(trainer)
    assert log.steps == tuple(range(1, STEPS + 1)) == tuple(e["step"] for e in train)
    logged_names = {k for e in train for k in e if k != "step"}
    assert all(name.startswith(DERIVED) for name in set(log.metrics) - logged_names)
    for entry in train:
        at = log.steps.index(entry["step"])
        for key, value in entry.items():
            if key != "step":
                got = log.metrics[key][at]
                assert got == float(value) or (math.isnan(got) and math.isnan(value)), (entry["step"], key)
    for name in logged_names:  # nothing invented: a name is None exactly where TRL logged nothing
        assert [v is not None for v in log.metrics[name]] == [name in e for e in train], name
    assert opened.refused == ()
    # the completions tables beside it joined the log as samples/… at every logged step
    assert opened.completions is not None and opened.completions.files == STEPS
    assert all(v is not None for v in log.metrics["samples/reward_mean"])
    assert [r.step for r in opened.records] == RECORDED and sorted(opened.recorded) == RECORDED


def test_each_linked_records_checks_all_pass(trainer, opened):
    logged = {e["step"]: e for e in history(trainer)}
    for linked in opened.records:
        record = linked.entry.payload
        assert record.run.step == linked.step and record.run.framework == "trl"
        assert record.metrics and all(logged[linked.step][k] == v for k, v in record.metrics.items())
        found = checks(record, recompute(record))
        assert len(found) >= 10 and all(c.ok for c in found), (linked.step, [c for c in found if not c.ok])


def pandas_metrics(df: pd.DataFrame) -> dict[str, float]:
    per = df[list(FUNCS)].astype("float64")
    unscorable = per.isna().all(axis=1)
    total = per.sum(axis=1, skipna=True)[~unscorable]  # TRL: nansum of weight 1 each, unscorable rows left out
    adv = df["advantage"].astype("float64")
    out = {"samples/count": float(len(df)), "samples/advantage_mean": adv.mean(),
           "samples/advantage_abs_mean": adv.abs().mean(), "samples/advantage_std": adv.std(ddof=1),
           "samples/zero_advantage_share": float((adv == 0).mean()), "samples/unscorable_share": unscorable.mean(),
           "samples/reward_mean": total.mean(), "samples/reward_std": total.std(ddof=1),
           "samples/completion_chars_mean": df["completion"].str.len().astype("float64").mean()}
    for f in FUNCS:
        out |= {f"samples/rewards/{f}/mean": per[f].mean(), f"samples/rewards/{f}/std": per[f].std(ddof=1)}
    return out


def test_trls_completions_tables_read_as_pandas_reads_them_and_as_trl_logged(trainer):
    out = pathlib.Path(trainer.args.output_dir)
    read = read_completions_dir(out)
    assert read.refused == () and read.files == STEPS
    assert sorted(read.metrics) == [e["step"] for e in history(trainer)]  # a file at every logging step
    logged = {e["step"]: e for e in history(trainer)}
    for step, metrics in read.metrics.items():
        df = pd.read_parquet(out / "completions" / f"completions_{step:05d}.parquet")
        assert list(df.columns) == ["step", "prompt", "completion", *FUNCS, "advantage"]  # TRL's own order
        assert (df["step"] == step).all() and len(df) == trainer.args.generation_batch_size
        want = pandas_metrics(df)
        assert set(metrics) == set(want)
        for key, value in want.items():
            assert metrics[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (step, key)
        # the same rows TRL's logged numbers are of: one generation batch per step, all of it in the table
        pairs = [("samples/reward_mean", "reward"), ("samples/reward_std", "reward_std"),
                 *((f"samples/rewards/{f}/{s}", f"rewards/{f}/{s}") for f in FUNCS for s in ("mean", "std"))]
        for mine, theirs in pairs:
            assert metrics[mine] == pytest.approx(logged[step][theirs], rel=1e-6, abs=1e-7), (step, mine)
        # a tied group's advantages are exactly 0; a row at its group's mean is too
        assert metrics["samples/zero_advantage_share"] >= logged[step]["frac_reward_zero_std"] - 1e-12
    assert any("log-probs" in why for why in read.lacks)
