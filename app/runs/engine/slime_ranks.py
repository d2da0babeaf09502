"""slime's per-rank train dumps, the layout before format 2: `DIR/train_data/{rollout_id}_{rank}.pt`, one rollout's
files put back together as one step.

The writer, field for field: `save_debug_train_data` (slime/utils/train_dump_utils.py at d38dc29, the last commit
before 681b3ad, #2266, replaced it with format 2; first written inline in slime/backends/megatron_utils/actor.py by
ed2f3a9, #93, July 2025). Every rank, once the step trained, wrote
`torch.save(dict(rollout_id=rollout_id, rank=torch.distributed.get_rank(), rollout_data=rollout_data), path)`, the
path `--save-debug-train-data` formatted with `rollout_id` and `rank` (`--dump-details DIR` sets it to
`DIR/train_data/{rollout_id}_{rank}.pt`, slime/utils/arguments.py). `rollout_data` is the rank's RolloutBatch as the
trainer held it: columns with one entry per sample of the rank's data-parallel shard (slime/ray/rollout.py
`_split_train_data_by_dp`, slime/utils/data.py `process_rollout_data`): `tokens`, `response_lengths`, `rewards`,
`truncated`, `loss_masks`, `sample_indices` (Sample.index), `rollout_ids`, `rollout_log_probs`, ...; then what the
step computed (actor.py `train_actor`): `log_probs` (and `entropy`), `ref_log_probs`, `kl`, `advantages`, `returns`.
`raw_reward` and the batch sizes are the whole batch's and are not read.

Why the ranks are not simply added up:
- every rank wrote its file: the tensor-parallel ranks, and the pipeline stages, of one data-parallel shard hold the
  same samples. A sample is counted once, by its `sample_indices` entry; its copies must agree bit for bit (the
  log-probs are all-reduced: every rank holds the same values), else the step is refused.
- a pipeline stage before the last computes no log-probs and no advantages (model.py `forward_only` and loss.py
  `compute_advantages_and_returns` store them on the last stage only): its file adds nothing, but every sample it
  names must be found whole in another rank's file, or the step would be a part of its batch.
- `raw_reward` is the whole batch's rewards in most versions (d38dc29: "shipped whole on purpose"; the rank's share
  in some, as at 36f1a48): a step whose files hold fewer samples than a `raw_reward` list is refused (a shard's files
  are missing), which a rank's share can never trigger.
- slime's train data carries the inference log-probs (`rollout_log_probs`) from 067d65a (#179, August 2025): a dump
  from before has none, and is refused with that said (no train/inference mismatch can be computed from it).
- with context parallelism a rank holds its slice of each response's log-probs (cp_utils.py
  `slice_log_prob_with_cp`) beside the whole loss mask. The slices are not joined here (format 2's writer gathers
  them before saving): such a step is refused and says why.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch

from app.domain.json_path import render_loc
from app.runs.domain.token_exports import ExportFile, TokenExportError, TokenSequence
from app.runs.engine.slime_dump import REQUIRED, load_plain, sample_sequence

COLUMNS = (*REQUIRED, "entropy", "truncated")
CP_HINT = ("a context-parallel rank's slice of the response: slime's per-rank dumps saved each rank's slice, this "
           "reader does not join them (format 2's writer does)")


def _rank_data(dump: Any, step: int, rank: int | None, where: str) -> Mapping[str, Any]:
    if not isinstance(dump, Mapping) or not isinstance(dump.get("rollout_data"), Mapping):
        raise TokenExportError(where, "rollout_data", "expected the rank's rollout_data dict (slime's "
                                                      "save_debug_train_data: rollout_id, rank, rollout_data)")
    if dump.get("rollout_id") != step:
        raise TokenExportError(where, "rollout_id", f"{dump.get('rollout_id')!r} in a file named for {step}")
    if dump.get("rank") != rank:
        raise TokenExportError(where, "rank", f"{dump.get('rank')!r} in a file named for rank {rank}")
    return dump["rollout_data"]


def _indices(data: Mapping[str, Any], where: str) -> list[int]:
    indices = data.get("sample_indices")
    if isinstance(indices, torch.Tensor):
        indices = indices.tolist()
    if not isinstance(indices, list) or not all(isinstance(k, int) and not isinstance(k, bool) for k in indices):
        raise TokenExportError(where, "rollout_data.sample_indices", "expected a list of sample indices (slime "
                                                                     "writes one per sample of the rank's shard)")
    if len(set(indices)) != len(indices):
        raise TokenExportError(where, "rollout_data.sample_indices", "a sample index listed twice in one rank")
    return indices


def _column(data: Mapping[str, Any], key: str, n: int, where: str) -> list[Any] | None:
    values = data.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != n:
        got = f"{len(values)} entries" if isinstance(values, list) else type(values).__name__
        raise TokenExportError(where, f"rollout_data.{key}", f"expected one entry per sample ({n}), got {got}")
    return values


def _sliced(values: list[Any] | None, masks: list[Any], key: str, i: int, where: str) -> None:
    if values is None:
        return
    v, m = values[i], masks[i]
    if isinstance(v, torch.Tensor) and isinstance(m, torch.Tensor) and v.dim() == m.dim() == 1 \
            and v.numel() < m.numel():
        raise TokenExportError(where, render_loc(("rollout_data", key, i)),
                               f"{v.numel()} values, the response has {m.numel()}: {CP_HINT}")


def _loc(i: int, key: str) -> tuple[int | str, ...]:
    return ("rollout_data", key, i)


def _digest(seq: TokenSequence) -> bytes:
    h = hashlib.sha256()
    for a in (seq.loss_mask, seq.advantages, seq.inference, seq.trainer, seq.entropy):
        h.update(b"-" if a is None else a.tobytes())
    h.update(repr(seq.truncated).encode())
    return h.digest()


def read_slime_ranks(files: list[ExportFile], step: int, label: Callable[[Path], str]) -> Iterator[TokenSequence]:
    """One rollout's rank files (rank order) as its samples, each once. Raises TokenExportError naming the file."""
    kept: dict[int, tuple[str, bytes]] = {}  # sample index -> (the file it was read from, its arrays' digest)
    named: dict[int, str] = {}  # sample index -> a file (a pipeline stage before the last) naming it, no log-probs
    batch_size = 0  # the longest raw_reward list: the whole batch's where slime shipped it whole
    for export in files:
        where = label(export.path)
        data = _rank_data(load_plain(export.path, where), step, export.rank, where)
        indices = _indices(data, where)
        if data.get("log_probs") is None and data.get("advantages") is None:
            for k in indices:
                named.setdefault(k, where)
            continue
        if data.get("rollout_log_probs") is None:
            raise TokenExportError(where, "rollout_data.rollout_log_probs", "missing: slime's train data carries the "
                                   "inference log-probs from 067d65a (#179, August 2025) on; without them there is no "
                                   "train/inference mismatch to compute")
        batch = data.get("raw_reward")
        if isinstance(batch, list):
            batch_size = max(batch_size, len(batch))
        columns = {key: _column(data, key, len(indices), where) for key in COLUMNS}
        masks = columns["loss_masks"]
        for i, k in enumerate(indices):
            if masks is not None:
                for key in ("rollout_log_probs", "log_probs", "advantages", "entropy"):
                    _sliced(columns[key], masks, key, i, where)
            sample = {key: None if values is None else values[i] for key, values in columns.items()}
            seq = sample_sequence(sample, partial(_loc, i), where)
            digest = _digest(seq)
            if k in kept:
                first, seen = kept[k]
                if seen != digest:
                    raise TokenExportError(where, render_loc(("rollout_data", "sample_indices", i)),
                                           f"sample {k} differs from its copy in {first} (ranks of one shard hold "
                                           "the same samples)")
                continue
            kept[k] = (where, digest)
            yield seq
    missing = [k for k in named if k not in kept]
    if missing:
        raise TokenExportError(named[missing[0]], "rollout_data.log_probs",
                               f"missing for {len(missing)} sample(s) (first: sample {missing[0]}), and no other rank "
                               f"of rollout {step} has them: a pipeline stage before the last computes none, the "
                               "last stage's files are needed")
    if len(kept) < batch_size:
        raise TokenExportError(label(files[0].path), "rollout_data.raw_reward",
                               f"the batch has {batch_size} samples, rollout {step}'s rank files hold {len(kept)}: "
                               "some shard's files are missing")


__all__ = ["read_slime_ranks"]
