"""TRL's per-sample table (issue 34): `OUTPUT_DIR/completions/completions_{step:05d}.parquet`, read into per-step
numbers (`samples/…`) that join the run's logged metrics.

From TRL's own writer, `GRPOTrainer.log` (trl/trainer/grpo_trainer.py, TRL 1.16.0; the same table at huggingface/trl
f2cd57710ae345ea6428ae95363267fcf38a3dc8, 1.10.0.dev0), with `log_completions=True`: at every `log()` call, on the
main process only, `pd.DataFrame({"step", "prompt", "completion", **rewards, **extra, "advantage"}).to_parquet()`,
one row per completion. `step` is global_step on every row; each reward function has a column named as TRL names
it (`reward_func_names`: a callable's name, a reward model's id), NaN where it returned None; `extra` are
`log_extra` columns; `advantage` is TRL's (NaN forced to 0). The rows are TRL's `_logs` deques (maxlen
generation_batch_size) of gathered rows, the newest generation batch of every process: with steps_per_generation or
num_iterations > 1 consecutive files repeat one batch, with logging_steps > 1 only the window's last batch is
there, and an evaluation at a step rewrites that step's file with its own rows.

There is no total reward column: TRL's logged `reward` is the mean over rows of Σ weight_k · reward_k (nansum; a
row every function left None is excluded). `samples/reward_mean` is that, with `reward_weights` (TRL's default: 1
each) over `reward_columns` (default: every numeric column but step and advantage: the file does not say which
numeric column is a reward function and which a log_extra one). A sequence-level source: no token ids, no log-probs
(`LACKS`). Each file is streamed in record batches (`iter_batches`), never read whole; refused by path and field.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from app.runs.domain.run_dir import completion_files

REQUIRED = ("step", "prompt", "completion", "advantage")  # TRL's writer writes each of them at every log
BATCH_ROWS = 16_384
LACKS = ("per-token log-probs (one row per completion, no token ids): no train/inference mismatch, no ratio, "
         "clip or KL recomputed", "per-token triage: no loss mask, no per-token advantage or entropy",
         "token lengths: a completion's length is counted in characters")
_NAME = re.compile(r"completions_(\d+)\.parquet\Z")


@dataclass(frozen=True)
class CompletionsRead:
    metrics: dict[int, dict[str, float]]  # step -> samples/… -> value
    files: int
    refused: tuple[tuple[str, str], ...]  # (file: field, why)
    lacks: tuple[str, ...] = LACKS


@dataclass
class _Moments:
    """Count, mean and M2 of a stream, merged batch by batch (Chan et al.), NaN values skipped."""
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: np.ndarray) -> None:
        x = x[~np.isnan(x)]
        if not x.size:
            return
        m = float(x.mean())
        n = self.n + x.size
        delta = m - self.mean
        self.m2 += float(((x - m) ** 2).sum()) + delta * delta * self.n * x.size / n
        self.mean += delta * x.size / n
        self.n = n

    def std(self) -> float:  # TRL's nanstd: Bessel-corrected
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else math.nan


class _Refused(Exception):
    """args: (where, why)"""


@dataclass
class _Step:
    rows: int = 0
    zero: int = 0
    unscorable: int = 0
    advantage: _Moments = field(default_factory=_Moments)
    abs_advantage: _Moments = field(default_factory=_Moments)
    reward: _Moments = field(default_factory=_Moments)
    chars: _Moments = field(default_factory=_Moments)
    per_func: dict[str, _Moments] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        out = {"samples/count": float(self.rows)}
        if not self.rows:
            return out
        out |= {"samples/advantage_mean": self.advantage.mean, "samples/advantage_abs_mean": self.abs_advantage.mean,
                "samples/advantage_std": self.advantage.std(), "samples/zero_advantage_share": self.zero / self.rows,
                "samples/unscorable_share": self.unscorable / self.rows}
        if self.reward.n:
            out |= {"samples/reward_mean": self.reward.mean, "samples/reward_std": self.reward.std()}
        for name, m in self.per_func.items():
            if m.n:
                out |= {f"samples/rewards/{name}/mean": m.mean, f"samples/rewards/{name}/std": m.std()}
        return out | ({"samples/completion_chars_mean": self.chars.mean} if self.chars.n else {})


def _chars(column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """Characters per completion: a string, or a conversation's message contents summed; None for anything else."""
    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return np.asarray(pc.utf8_length(column).to_numpy(zero_copy_only=False), dtype=np.float64)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type) \
            and t.value_type.get_field_index("content") >= 0 and pa.types.is_string(t.value_type.field("content").type):
        lengths = pc.fill_null(pc.utf8_length(pc.struct_field(pc.list_flatten(column), "content")), 0)
        parents = pc.list_parent_indices(column).to_numpy()
        return np.bincount(parents, weights=lengths.to_numpy().astype(np.float64), minlength=len(column))
    return None


def _read(path: Path, where: str, step: int, acc: _Step, reward_columns: Sequence[str] | None,
          weights: Sequence[float] | None) -> None:
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise _Refused(where, f"not a Parquet file: {exc}") from None
    schema = parquet.schema_arrow
    for name in REQUIRED:
        if name not in schema.names:
            raise _Refused(f"{where}: {name}", "missing: TRL's completions table always has this column")
    for name in ("step", "advantage"):
        if not (pa.types.is_integer(schema.field(name).type) or pa.types.is_floating(schema.field(name).type)):
            raise _Refused(f"{where}: {name}", f"expected numbers, got {schema.field(name).type}")
    numeric = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
               or pa.types.is_null(f.type)]
    rewards = [n for n in numeric if n not in REQUIRED] if reward_columns is None else list(reward_columns)
    for name in rewards:
        if name not in numeric:
            raise _Refused(f"{where}: {name}", "a reward column must hold numbers"
                           if name in schema.names else "missing: named as a reward column")
    w = np.ones(len(rewards)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (len(rewards),):
        raise _Refused(where, f"{len(w)} reward weights for {len(rewards)} reward columns {rewards}")
    acc.per_func = {name: _Moments() for name in rewards}
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=["step", "completion", "advantage", *rewards]):
        first = acc.rows
        steps = batch.column("step")
        if steps.null_count or np.any(steps.to_numpy(zero_copy_only=False) != step):
            bad = int(np.flatnonzero(pc.fill_null(pc.not_equal(steps, step), True).to_numpy(zero_copy_only=False))[0])
            raise _Refused(f"{where}: step[{first + bad}]", f"{steps[bad].as_py()!r} in the file of step {step}")
        adv = np.asarray(batch.column("advantage").to_numpy(zero_copy_only=False), dtype=np.float64)
        if not np.isfinite(adv).all():
            bad = int(np.flatnonzero(~np.isfinite(adv))[0])
            raise _Refused(f"{where}: advantage[{first + bad}]", f"{adv[bad]} (null or not finite): TRL writes a "
                                                                 "finite advantage on every row")
        acc.rows += len(adv)
        acc.zero += int((adv == 0).sum())
        acc.advantage.add(adv)
        acc.abs_advantage.add(np.abs(adv))
        if rewards:
            per = np.column_stack([np.asarray(batch.column(n).to_numpy(zero_copy_only=False), dtype=np.float64)
                                   for n in rewards])
            for i, name in enumerate(rewards):
                acc.per_func[name].add(per[:, i])
            unscorable = np.isnan(per).all(axis=1)
            acc.unscorable += int(unscorable.sum())
            acc.reward.add(np.where(unscorable, np.nan, np.nansum(per * w, axis=1)))
        chars = _chars(batch.column("completion"))
        if chars is not None:
            acc.chars.add(chars)


def read_completions_dir(root: Path, reward_columns: Sequence[str] | None = None,
                         reward_weights: Sequence[float] | None = None) -> CompletionsRead:
    """Every `completions/completions_*.parquet` of a run's output directory, one step per file (from its name,
    checked against its `step` column). A refused file leaves its step out and says why."""
    metrics: dict[int, dict[str, float]] = {}
    refused: list[tuple[str, str]] = []
    seen: set[int] = set()
    for path in (found := completion_files(root)):
        where = str(path.relative_to(root))
        m = _NAME.match(path.name)
        if m is None:
            refused.append((where, "the name gives no step: TRL writes completions_{global_step:05d}.parquet"))
            continue
        step = int(m.group(1))
        if step in seen:
            refused.append((where, f"a second file of step {step}"))
            continue
        seen.add(step)
        acc = _Step()
        try:
            _read(path, where, step, acc, reward_columns, reward_weights)
        except _Refused as exc:
            refused.append((exc.args[0], f"{exc.args[1]} (step {step} left out)"))
            continue
        except (pa.ArrowException, OSError) as exc:
            refused.append((where, f"cannot be read: {exc} (step {step} left out)"))
            continue
        metrics[step] = acc.metrics()
    return CompletionsRead(dict(sorted(metrics.items())), len(found), tuple(refused))


__all__ = ["LACKS", "CompletionsRead", "read_completions_dir"]
