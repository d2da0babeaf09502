"""TRL's completions table (issue 34): app/runs/domain/trl_completions.py.

The fixtures are written with pyarrow in the columns of TRL's own writer, GRPOTrainer.log in
trl/trainer/grpo_trainer.py (TRL 1.16.0; huggingface/trl f2cd577): `step` (global_step on every row), `prompt`,
`completion`, one column per reward function under its reward_func_names name (here `ends` and `count_a`, the
peers' two reward functions), log_extra columns, then `advantage`; the file is
completions/completions_{global_step:05d}.parquet. Every metric is compared with numpy in float64.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.runs.domain import trl_completions
from app.runs.domain.trl_completions import BATCH_ROWS, read_completions_dir


def table(at: int, n: int, seed: int = 0, conversational: bool = False, **override) -> dict:
    rng = np.random.default_rng(seed)
    ends = rng.integers(0, 2, n).astype(np.float64)
    count_a = rng.integers(0, 5, n) / 4
    count_a[rng.random(n) < 0.2] = np.nan  # the function returned None there
    ends[0] = count_a[0] = np.nan  # every function returned None: an unscorable row (TRL's advantage 0)
    advantage = np.round(rng.normal(size=n), 1)  # rounded so some are exactly 0
    texts = ["a" * int(k) + " b" * int(j) for k, j in zip(rng.integers(0, 9, n), rng.integers(0, 3, n), strict=True)]
    completion = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
    columns = {"step": [at] * n, "prompt": [f"p{i // 4}" for i in range(n)], "completion": completion,
               "ends": ends, "count_a": count_a, "advantage": advantage}
    columns.update(override)
    return columns


def write(root, step: int, columns: dict, name: str | None = None, row_group_size: int | None = None):
    folder = root / "completions"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"completions_{step:05d}.parquet")
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path


def expected(columns: dict, weights=(1.0, 1.0)) -> dict[str, float]:
    adv = np.asarray(columns["advantage"], dtype=np.float64)
    per = np.column_stack([np.asarray(columns[k], dtype=np.float64) for k in ("ends", "count_a")])
    unscorable = np.isnan(per).all(axis=1)
    total = np.nansum(per * np.asarray(weights), axis=1)[~unscorable]  # TRL: nansum, unscorable rows left out
    texts = [c if isinstance(c, str) else "".join(m["content"] for m in c) for c in columns["completion"]]
    out = {"samples/count": float(len(adv)), "samples/advantage_mean": adv.mean(),
           "samples/advantage_abs_mean": np.abs(adv).mean(), "samples/advantage_std": adv.std(ddof=1),
           "samples/zero_advantage_share": float((adv == 0).mean()), "samples/unscorable_share": float(unscorable.mean()),
           "samples/reward_mean": total.mean(), "samples/reward_std": total.std(ddof=1),
           "samples/completion_chars_mean": float(np.mean([len(t) for t in texts]))}
    for k in ("ends", "count_a"):
        x = np.asarray(columns[k], dtype=np.float64)
        x = x[~np.isnan(x)]
        out |= {f"samples/rewards/{k}/mean": x.mean(), f"samples/rewards/{k}/std": x.std(ddof=1)}
    return out


def assert_metrics(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-14), key


def test_each_steps_metrics_equal_numpy_in_float64(tmp_path):
    tables = {3: table(3, 16, seed=1), 6: table(6, 64, seed=2, conversational=True), 12: table(12, 8, seed=3)}
    for step, columns in tables.items():
        write(tmp_path, step, columns)
    read = read_completions_dir(tmp_path)
    assert read.files == 3 and read.refused == () and list(read.metrics) == [3, 6, 12]
    for step, columns in tables.items():
        assert_metrics(read.metrics[step], expected(columns))
    assert read.metrics[3]["samples/zero_advantage_share"] > 0 and read.metrics[6]["samples/unscorable_share"] > 0


def test_reward_columns_and_weights_as_the_trainer_had_them(tmp_path):
    columns = table(2, 40, seed=4, difficulty=np.arange(40, dtype=np.float64))  # a numeric log_extra column
    write(tmp_path, 2, columns)
    default = read_completions_dir(tmp_path).metrics[2]
    assert "samples/rewards/difficulty/mean" in default  # the file cannot tell a log_extra column from a reward
    read = read_completions_dir(tmp_path, reward_columns=["ends", "count_a"], reward_weights=[2.0, 0.5])
    assert_metrics(read.metrics[2], expected(columns, weights=(2.0, 0.5)))


def test_a_sequence_level_source_says_what_it_cannot_show(tmp_path):
    read = read_completions_dir(tmp_path)  # no completions/ folder
    assert read.metrics == {} and read.files == 0 and read.refused == ()
    assert any("log-probs" in why and "mismatch" in why for why in read.lacks)
    assert any("triage" in why for why in read.lacks)


def refusal(tmp_path, **kwargs) -> tuple[str, str]:
    write(tmp_path, 1, table(1, 8))  # a good file beside the bad one is read all the same
    read = read_completions_dir(tmp_path, **kwargs)
    assert 1 in read.metrics or kwargs
    (only,) = read.refused
    return only


@pytest.mark.parametrize("column", ["step", "prompt", "completion", "advantage"])
def test_a_missing_column_is_named(tmp_path, column):
    columns = table(5, 8)
    del columns[column]
    write(tmp_path, 5, columns)
    where, why = refusal(tmp_path)
    assert where == f"completions/completions_00005.parquet: {column}" and "missing" in why and "step 5" in why


def test_a_file_that_is_not_parquet(tmp_path):
    (tmp_path / "completions").mkdir()
    (tmp_path / "completions" / "completions_00004.parquet").write_bytes(b'{"not": "parquet"}')
    where, why = refusal(tmp_path)
    assert where == "completions/completions_00004.parquet" and why.startswith("not a Parquet file")


@pytest.mark.parametrize("bad, shown", [(np.nan, "nan"), (np.inf, "inf"), (None, "nan")])
def test_a_non_finite_advantage_is_named_by_row(tmp_path, bad, shown):
    adv = list(np.linspace(-1, 1, 50))
    adv[37] = bad
    write(tmp_path, 7, table(7, 50, advantage=pa.array(adv, type=pa.float64())), row_group_size=16)
    where, why = refusal(tmp_path)
    assert where == "completions/completions_00007.parquet: advantage[37]" and why.startswith(shown)


def test_a_non_numeric_advantage(tmp_path):
    write(tmp_path, 7, table(7, 4, advantage=["0.1"] * 4))
    where, why = refusal(tmp_path)
    assert where.endswith("completions_00007.parquet: advantage") and "expected numbers" in why


def test_a_step_column_that_disagrees_with_the_name(tmp_path):
    write(tmp_path, 9, table(9, 40, step=[9] * 33 + [10] * 7), row_group_size=10)
    where, why = refusal(tmp_path)
    assert where == "completions/completions_00009.parquet: step[33]" and why.startswith("10 in the file of step 9")


def test_names_that_give_no_step_or_a_second_file_of_one(tmp_path):
    write(tmp_path, 1, table(1, 8))
    write(tmp_path, 1, table(1, 8), name="completions_1.parquet")
    write(tmp_path, 2, table(2, 8), name="completions_last.parquet")
    read = read_completions_dir(tmp_path)
    assert list(read.metrics) == [1] and read.files == 3
    assert dict(read.refused) == {"completions/completions_1.parquet": "a second file of step 1",
                                  "completions/completions_last.parquet":
                                      "the name gives no step: TRL writes completions_{global_step:05d}.parquet"}


def test_named_reward_columns_must_exist_and_hold_numbers(tmp_path):
    write(tmp_path, 3, table(3, 8))
    read = read_completions_dir(tmp_path, reward_columns=["ends", "prompt"])
    assert read.refused[0][0] == "completions/completions_00003.parquet: prompt"
    assert "must hold numbers" in read.refused[0][1] and read.metrics == {}
    read = read_completions_dir(tmp_path, reward_columns=["accuracy"])
    assert read.refused[0] == ("completions/completions_00003.parquet: accuracy",
                               "missing: named as a reward column (step 3 left out)")
    read = read_completions_dir(tmp_path, reward_weights=[1.0])
    assert "1 reward weights for 2 reward columns" in read.refused[0][1]


def test_a_large_file_is_streamed_in_record_batches_never_read_whole(tmp_path, monkeypatch):
    n = 200_000
    columns = table(40, n, seed=5)
    write(tmp_path, 40, columns, row_group_size=10_000)
    assert pq.ParquetFile(tmp_path / "completions" / "completions_00040.parquet").num_row_groups == 20
    batches: list[int] = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in original(self, *args, **kwargs):
            batches.append(batch.num_rows)
            yield batch

    def whole(*args, **kwargs):
        raise AssertionError("the whole file was read at once")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    for name in ("read", "read_row_groups", "read_row_group"):
        monkeypatch.setattr(pq.ParquetFile, name, whole)
    monkeypatch.setattr(pq, "read_table", whole)
    read = read_completions_dir(tmp_path)
    assert read.refused == ()
    assert sum(batches) == n and max(batches) <= BATCH_ROWS and len(batches) >= n // BATCH_ROWS
    assert_metrics(read.metrics[40], expected(columns))


def test_the_module_stays_small():
    assert len(open(trl_completions.__file__).read().splitlines()) < 200
