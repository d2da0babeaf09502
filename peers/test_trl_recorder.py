"""The TRL recorder (app/kinds/step_record/recorders/trl.py) on real GRPOTrainer runs, checked by the
app's recomputation.

Each run is TRL 1.16's own training loop on CPU: a tiny Llama built from a config (hidden 32, two
layers, saved to a folder so TRL can load its reference model from it) and a byte-level BPE
tokenizer trained here on a few lines of text, so nothing is downloaded. Two reward functions:
`ends` (1 when the completion holds EOS; groups where none or all do have zero variance) and
`count_a`. num_iterations=2 with a high learning rate: every second step reuses its batch after an
update, so ratios move off 1 and some tokens are clipped.

For every record: it parses with `parse_record`, and `recompute(record).metrics` equals what TRL
logged for that step, key by key, to 1e-6 relative. Two floors, both printed in the summary:
- a logged value of exactly 0 is compared absolutely (|app| <= 1e-6);
- TRL's loss is a float32 sum of terms that cancel (advantages are centred per group; at ratio 1 a
  grpo loss is 0 up to rounding), so its own rounding is about 1e-7 of the terms' size, not of the
  result: the loss is compared against max(|logged|, scale), scale = Σ|terms| (checks.py's rule).
  The summary also gives the plain relative difference.
With gradient accumulation TRL logs the mean of the micro-batches' own token means (clip fractions,
KL, entropy): those are compared with the mean of the recomputed micro-batches (the recorder says
which completions each held); the loss, a sum over the window, with the whole record.

UPDATE_TRL_FIXTURE=1 rewrites tests/fixtures/trl_step_record.grpo-step.json (the app's tests open
it without TRL) from the beta run's second step.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; no telemetry either
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import pytest
import torch
from datasets import Dataset
from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig

from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.engine.step import recompute
from app.kinds.step_record.recorders.trl import RecordingGRPOTrainer
from peers.local_tokenizer import CORPUS, bpe_tokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "trl_step_record.grpo-step.json"
RTOL = 1e-6
KEYS = ("loss", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "kl", "entropy")
PROMPTS = ["ab ba", "cab", "dab ab", "bad", "abba", "dad"]
RUNS = {
    "dapo": dict(loss_type="dapo", epsilon_high=0.28),
    "grpo": dict(loss_type="grpo", mask_truncated_completions=True),
    "dr_grpo": dict(loss_type="dr_grpo"),
    "grpo-sequence": dict(loss_type="grpo", importance_sampling_level="sequence", epsilon=3e-3, epsilon_high=4e-3),
    "dapo-beta": dict(loss_type="dapo", beta=0.1),
    # two micro-batches of 4 per optimizer step
    "grpo-accumulation": dict(loss_type="grpo", beta=0.05, gradient_accumulation_steps=2,
                              per_device_train_batch_size=4, max_steps=2),
}
WORST: dict = defaultdict(lambda: (0.0, ""))  # (run, key, measure) -> (max difference, where)


class _Summary:
    def pytest_terminal_summary(self, terminalreporter):
        if not WORST:
            return
        tr = terminalreporter
        tr.section("TRL recorder: recomputed from the record vs TRL's logged value (max over steps)")
        for (run, key, measure), (rel, where) in sorted(WORST.items()):
            tr.write_line(f"{run:18s} {key:23s} {measure:31s} {rel:8.1e}  ({where})")


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    # a plugin of this module's own, so peers/conftest.py's summary stays as it is
    if not request.config.pluginmanager.has_plugin("trl-recorder-summary"):
        request.config.pluginmanager.register(_Summary(), "trl-recorder-summary")


TOKENIZER = bpe_tokenizer(CORPUS)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(TOKENIZER), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=TOKENIZER.pad_token_id, eos_token_id=TOKENIZER.eos_token_id, bos_token_id=None)
    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(path)
    return str(path)


def ends(completions, completion_ids, **kwargs):
    return [1.0 if TOKENIZER.eos_token_id in ids else 0.0 for ids in completion_ids]


def count_a(completions, **kwargs):
    return [text.count("a") / 4 for text in completions]


def _trainer(model_dir: str, out: pathlib.Path, **overrides) -> RecordingGRPOTrainer:
    args = dict(output_dir=str(out), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                logging_steps=1, disable_tqdm=True, seed=0, per_device_train_batch_size=8, num_generations=4,
                max_completion_length=8, max_steps=3, num_iterations=2, learning_rate=0.05)
    args.update(overrides)
    return RecordingGRPOTrainer(model=model_dir, args=GRPOConfig(**args), reward_funcs=[ends, count_a],
                                train_dataset=Dataset.from_dict({"prompt": PROMPTS}), processing_class=TOKENIZER,
                                record_steps="all", record_dir=str(out / "records"))


def _part(raw: dict, members: list[tuple[int, int]]) -> dict:
    """The record restricted to one micro-batch's completions."""
    keep = set(members)
    groups = []
    for gi, group in enumerate(raw["groups"]):
        completions = [c for ci, c in enumerate(group["completions"]) if (gi, ci) in keep]
        if completions:
            groups.append({**group, "completions": completions})
    return {**raw, "groups": groups}


def _worst(run: str, key: str, measure: str, value: float, where: str) -> None:
    WORST[(run, key, measure)] = max(WORST[(run, key, measure)], (value, where))


def _compare(run: str, step: int, key: str, logged: float, mine: float, scale: float) -> None:
    where = f"step {step}: TRL {logged:.9g}, app {mine:.9g}"
    diff = abs(mine - logged)
    if key == "loss":  # float32 cancellation: see the module's docstring
        if logged:
            _worst(run, key, "relative (shown, not asserted)", diff / abs(logged), where)
        measure, denominator = "relative to max(|TRL|, scale)", max(abs(logged), scale)
    elif logged == 0:
        measure, denominator = "absolute (TRL logged 0)", 1.0
    else:
        measure, denominator = "relative", abs(logged)
    _worst(run, key, measure, diff / denominator, where)
    assert diff <= RTOL * denominator, f"{run} {key} at step {step}: TRL logged {logged!r}, the app {mine!r}"


@pytest.fixture(scope="module")
def runs(model_dir, tmp_path_factory) -> dict:
    out = {}
    for name, overrides in RUNS.items():
        trainer = _trainer(model_dir, tmp_path_factory.mktemp(name), **overrides)
        trainer.train()
        out[name] = trainer
    return out


@pytest.mark.parametrize("run", list(RUNS))
# a micro-batch may hold one completion of a group: recompute's what-if advantages (unused here) warn
@pytest.mark.filterwarnings("ignore:std\\(\\):UserWarning")  # "std(): degrees of freedom is <= 0"
def test_recomputed_metrics_equal_trls_logged_values(runs, run):
    trainer = runs[run]
    steps = trainer.args.max_steps
    assert sorted(trainer.step_records) == list(range(1, steps + 1))
    clipped = 0.0
    for step, path in sorted(trainer.step_records.items()):
        raw = json.loads(pathlib.Path(path).read_text())
        record = parse_record(raw, path)
        logged = {k: v for k, v in record.metrics.items() if k in KEYS and v is not None}
        assert {"loss", "entropy", "clip_ratio/region_mean"} <= set(logged)
        assert ("kl" in logged) == (trainer.beta > 0)
        result = recompute(record)  # under accumulation: the mean over the record's own micro_batch fields
        micro = trainer.step_micro_batches[step]
        assert len(record.micro_batches()) == len(micro)
        parts = [recompute(parse_record(_part(raw, members))) for members in micro] if len(micro) > 1 else []
        for key, value in logged.items():
            _compare(run, step, key, value, result.metrics[key], result.scale)
            if parts and key != "loss":  # the same as recomputing each micro-batch alone, then the mean
                mine = sum(p.metrics[key] for p in parts) / len(parts)
                assert result.metrics[key] == pytest.approx(mine, rel=1e-12, abs=1e-15), (run, step, key)
        clipped = max(clipped, logged["clip_ratio/region_mean"])
        assert record.run.step == step and record.run.framework == "trl" and record.run.dtype == "float32"
        assert record.run.model == "tiny-llama"
        assert ("gradient accumulation" in record.run.note) == (len(micro) > 1)
    assert clipped > 0, f"{run}: no token was clipped in any step, so the clip fractions were never tested"


def test_records_hold_the_groups_tokens_and_conventions(runs):
    for trainer in runs.values():
        a = trainer.args
        for path in trainer.step_records.values():
            record = parse_record(pathlib.Path(path).read_bytes(), path)
            c = record.config
            assert c.clip_epsilon == a.epsilon and c.beta == a.beta and c.max_length == a.max_completion_length
            assert c.importance_sampling_level == a.importance_sampling_level
            assert c.loss_aggregation == {"grpo": "sample_mean", "dapo": "token_mean",
                                          "dr_grpo": "token_sum_norm"}[a.loss_type]
            assert c.token_normalizer is None  # dapo's num_items_in_batch is this record's token count here
            assert c.gradient_accumulation_steps == a.gradient_accumulation_steps
            assert record.framework_config["loss_type"] == a.loss_type
            assert record.reward_functions == ["ends", "count_a"]
            # every completion of the step: per_device_train_batch_size x accumulation, in groups of G
            assert [len(g.completions) for g in record.groups] == [a.num_generations] * 2
            for group in record.groups:
                assert group.prompt in PROMPTS
                assert TOKENIZER.decode(list(group.prompt_token_ids)) == group.prompt
                for comp in group.completions:
                    ids = [int(i) for i in comp.token_ids]
                    # each token decoded alone; together they are the completion's text, spaces and newlines kept
                    assert "".join(comp.tokens) == TOKENIZER.decode(ids, skip_special_tokens=False)
                    assert comp.truncated == (TOKENIZER.eos_token_id not in ids)
                    assert not comp.truncated or len(ids) == a.max_completion_length
                    assert comp.rewards["ends"] == (0.0 if comp.truncated else 1.0)
                    masked_out = a.mask_truncated_completions and comp.truncated
                    assert comp.mask_or_ones().tolist() == [0 if masked_out else 1] * len(ids)
                    assert comp.old_logprobs is not None  # num_iterations=2: TRL computes log pi_old
                    assert (comp.ref_logprobs is not None) == (a.beta > 0)
                    assert comp.entropy is not None and comp.sampling_logprobs is None
    tokens = {t for trainer in runs.values() for p in trainer.step_records.values()
              for _, _, comp in parse_record(pathlib.Path(p).read_bytes()).completions() for t in comp.tokens}
    assert {"\n", " a", "<eos>"} <= tokens, "the tokens keep their spaces and newlines"


def test_fixture_is_a_real_record_the_app_agrees_with(runs):
    source = runs["dapo-beta"].step_records[2]
    if os.environ.get("UPDATE_TRL_FIXTURE") == "1":
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, FIXTURE)
    assert FIXTURE.stat().st_size <= 200_000
    record = parse_record(FIXTURE.read_bytes(), str(FIXTURE))
    assert record.run.framework == "trl" and record.config.beta > 0 and record.metrics["kl"] > 0
    assert record.metrics["clip_ratio/region_mean"] > 0
    result = recompute(record)
    for key in KEYS:
        logged = record.metrics[key]
        assert abs(result.metrics[key] - logged) <= RTOL * max(abs(logged), result.scale if key == "loss" else 0)


@pytest.mark.parametrize("run", list(RUNS))
def test_the_runs_trainer_state_reads_as_a_run_equal_to_its_log_history(runs, run):
    """Issue 34's run reader (app/runs/domain/run_log.py) on the trainer_state.json TRL's own
    Trainer writes: every logged metric of every step equals trainer.state.log_history, the closing entry
    apart; the findings' rules read TRL's real metric names."""
    import math

    from app.runs.domain.run_dir import find_trainer_state
    from app.runs.domain.run_findings import findings
    from app.runs.domain.run_log import SUMMARY_KEYS, read_trainer_state

    trainer = runs[run]
    trainer.save_state()  # output_dir/trainer_state.json, as a script's last line writes it
    path = find_trainer_state(pathlib.Path(trainer.args.output_dir))
    log = read_trainer_state(path.read_bytes(), source=str(path))
    history = trainer.state.log_history
    train = [e for e in history if not SUMMARY_KEYS & e.keys()]
    assert log.steps == tuple(range(1, trainer.args.max_steps + 1)) == tuple(e["step"] for e in train)
    for entry in train:
        at = log.steps.index(entry["step"])
        for key, value in entry.items():
            if key != "step":
                got = log.metrics[key][at]
                assert got == float(value) or (math.isnan(got) and math.isnan(value)), (run, entry["step"], key)
    assert sum(v is not None for values in log.metrics.values() for v in values) == \
        sum(len(e) - 1 for e in train)  # nothing invented
    (closing,) = [e for e in history if SUMMARY_KEYS & e.keys()]
    assert log.summary["train_runtime"] == closing["train_runtime"]
    assert {"loss", "kl" if trainer.beta > 0 else "loss", "clip_ratio/region_mean", "frac_reward_zero_std",
            "completions/clipped_ratio", "entropy"} <= set(log.metrics)
    rules = {f.rule for f in findings(log)}
    assert "clip_never" not in rules  # num_iterations = 2 and a high learning rate: these runs clip


def test_configurations_the_record_cannot_hold_are_refused(model_dir, tmp_path):
    with pytest.raises(ValueError) as refused:
        _trainer(model_dir, tmp_path, loss_type="sapo", top_entropy_quantile=0.5, logging_steps=2,
                 entropy_coef=0.01, off_policy_mask_threshold=0.5, delta=2.0)
    for words in ("loss_type='sapo'", "top_entropy_quantile", "logging_steps", "entropy bonus",
                  "off_policy_mask_threshold", "delta"):
        assert words in str(refused.value)
    with pytest.raises(ValueError, match="bnpo with gradient accumulation"):
        _trainer(model_dir, tmp_path, loss_type="bnpo", gradient_accumulation_steps=2, per_device_train_batch_size=4)
    with pytest.raises(ValueError, match="record_steps"):
        RecordingGRPOTrainer(model=model_dir, record_steps="some")


def test_the_app_never_needs_trl(monkeypatch):
    for path in (ROOT / "app").rglob("*.py"):
        if "recorders" not in path.parts:
            assert "app.kinds.step_record.recorders" not in path.read_text(encoding="utf-8"), path
    monkeypatch.delitem(sys.modules, "app.kinds.step_record.recorders.trl")
    monkeypatch.setitem(sys.modules, "trl", None)  # as if TRL were not installed
    with pytest.raises(ImportError, match=r"pip install -e '\.\[trl\]'"):
        import app.kinds.step_record.recorders.trl  # noqa: F401
