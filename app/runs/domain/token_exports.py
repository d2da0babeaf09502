"""Per-token dumps the RL frameworks write of their own (issue 34): prime-rl's token exports and slime's train dumps.

Both hold, for every trained token, the log-prob the inference engine sampled it with and the one the trainer
computed, the token's advantage and its loss mask: what the train/inference mismatch and the zero-signal triage
(token_stats.py) are computed from. Written from the projects' own code, field for field:

- **prime-rl** (`enable_token_export`; src/prime_rl/trainer/rl/token_export.py at 559b447, SCHEMA_VERSION 1):
  `OUTPUT_DIR/token_exports/step_N/rank_R.jsonl`, one JSON object per sequence (prompt and completion tokens
  packed together): `schema_version`, `step`, `rank`, `token_ids`, `position_ids`, `loss_mask` (bools),
  `advantages`, `inference_logprobs`, `trainer_logprobs`, `entropy`, and the exporter's own `mismatch_kl`,
  `importance_ratio`, `is_masked` (DPPO's trust-region mask; null where the loss has none). A non-finite float
  is written as null (`_json_float`); a STABLE file marks a step every rank has flushed.
- **slime** (`--dump-details DIR`; slime/observability/train_data_utils.py at 624b824, format_version 2):
  `DIR/train_data/{rollout_id}.pt`, a torch.save of `{"format_version": 2, "rollout_id", "samples": [...]}`,
  each sample its response's tensors: `rollout_log_probs` (inference), `log_probs` (trainer), `advantages`,
  `loss_masks`, optional `entropy`, and `truncated` (slime/ray/rollout.py). Read with `weights_only=True`:
  tensors, numbers, strings, lists and dicts only, never arbitrary pickled objects.
- **slime before format 2** (slime/utils/train_dump_utils.py `save_debug_train_data`, from ed2f3a9 in July 2025
  to d38dc29, replaced by 681b3ad in August 2026): every rank wrote `DIR/train_data/{rollout_id}_{rank}.pt`, its
  own shard as the trainer held it (engine/slime_ranks.py says how the ranks are put back together).
- **slime's rollout dumps** (slime/observability/rollout_data_utils.py `save_debug_rollout_data` at 624b824):
  `DIR/rollout_data/{rollout_id}.pt`, `{"rollout_id", "samples": [Sample.to_dict(), ...]}`: plain dicts (the
  status enum written as its value), so `weights_only=True` reads them (slime's own loader passes False only
  to rebuild Sample objects). They give the groups and rewards (engine/slime_rollouts.py); eval_{id}.pt is skipped.

Refused by file and field path (`token_exports/step_3/rank_0.jsonl line 4: $.loss_mask: …`), never guessed.
One sequence at a time is parsed: a file is streamed line by line (prime-rl) or is one step's batch (slime).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.domain.json_path import render_loc

PRIME_SCHEMA = 1
_STEP_DIR = re.compile(r"step_(\d+)\Z")
_RANK_FILE = re.compile(r"rank_(\d+)\.jsonl\Z")
_ROLLOUT_FILE = re.compile(r"(\d+)\.pt\Z")  # eval_{id}.pt, slime's evaluation dumps, hold no training step
_RANK_DUMP = re.compile(r"(\d+)_(\d+)\.pt\Z")  # slime before format 2: {rollout_id}_{rank}.pt


class TokenExportError(ValueError):
    def __init__(self, where: str, path: str, message: str) -> None:
        self.where, self.path, self.message = where, path, message
        super().__init__(f"{where}: {path or '$'}: {message}")


@dataclass(frozen=True)
class TokenSequence:
    """One trained sequence, token-aligned arrays (float64; NaN where the source wrote no finite value)."""
    loss_mask: np.ndarray  # bool: the token is trained on
    advantages: np.ndarray
    inference: np.ndarray  # log π_rollout(token)
    trainer: np.ndarray  # log π_trainer(token)
    entropy: np.ndarray | None
    is_masked: np.ndarray | None  # bool: the framework's own IS/trust-region mask dropped the token
    truncated: bool | None  # the completion hit its length limit (None: the source does not say)


@dataclass(frozen=True)
class ExportFile:
    step: int
    path: Path
    source: str  # "prime-rl" | "slime"
    rank: int | None = None  # slime's per-rank layout (before format 2): the rank its file name says


def find_token_exports(root: Path) -> tuple[ExportFile, ...]:
    """Every per-token file under a run directory, by step then name."""
    found: list[ExportFile] = []
    exports = root / "token_exports"
    if exports.is_dir():
        for folder in exports.iterdir():
            m = _STEP_DIR.match(folder.name)
            if m and folder.is_dir():
                found.extend(ExportFile(int(m.group(1)), p, "prime-rl") for p in folder.iterdir()
                             if _RANK_FILE.match(p.name) and p.is_file())
    dumps = root / "train_data"
    if dumps.is_dir():
        for p in dumps.iterdir():
            if not p.is_file():
                continue
            if m := _ROLLOUT_FILE.match(p.name):
                found.append(ExportFile(int(m.group(1)), p, "slime"))
            elif m := _RANK_DUMP.match(p.name):
                found.append(ExportFile(int(m.group(1)), p, "slime", int(m.group(2))))
    return tuple(sorted(found, key=lambda f: (f.step, f.source, -1 if f.rank is None else f.rank, f.path.name)))


def _floats(value: Any, loc: tuple[int | str, ...], n: int, where: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != n:
        got = f"{len(value)} values" if isinstance(value, list) else type(value).__name__
        raise TokenExportError(where, render_loc(loc), f"expected a list of {n} numbers (one per token), got {got}")
    for i, x in enumerate(value):
        if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
            raise TokenExportError(where, render_loc((*loc, i)), f"expected a number or null, got {json.dumps(x)}")
    return np.array([np.nan if x is None else x for x in value], dtype=np.float64)


def _bools(value: Any, loc: tuple[int | str, ...], n: int, where: str, optional: bool = False) -> np.ndarray | None:
    if not isinstance(value, list) or len(value) != n:
        got = f"{len(value)} values" if isinstance(value, list) else type(value).__name__
        raise TokenExportError(where, render_loc(loc), f"expected a list of {n} booleans (one per token), got {got}")
    if optional and all(x is None for x in value):
        return None  # the loss had no such mask (prime-rl writes [null] * n)
    for i, x in enumerate(value):
        if not isinstance(x, bool):
            raise TokenExportError(where, render_loc((*loc, i)), f"expected a boolean, got {json.dumps(x)}")
    return np.array(value, dtype=bool)


def prime_rl_sequence(obj: Any, step: int, where: str) -> TokenSequence:
    if not isinstance(obj, Mapping):
        raise TokenExportError(where, "", "expected one JSON object per line (a sequence)")
    if obj.get("schema_version") != PRIME_SCHEMA:
        raise TokenExportError(where, "schema_version", f"{json.dumps(obj.get('schema_version'))}: this reader "
                                                        f"knows prime-rl's token export schema {PRIME_SCHEMA}")
    if obj.get("step") != step:
        raise TokenExportError(where, "step", f"{json.dumps(obj.get('step'))} in the folder of step {step}")
    tokens = obj.get("token_ids")
    if not isinstance(tokens, list) or not tokens:
        raise TokenExportError(where, "token_ids", "expected a non-empty list of token ids")
    n = len(tokens)
    for key in ("loss_mask", "advantages", "inference_logprobs", "trainer_logprobs"):
        if key not in obj:
            raise TokenExportError(where, key, "missing")
    mask = _bools(obj["loss_mask"], ("loss_mask",), n, where)
    assert mask is not None
    entropy = _floats(obj["entropy"], ("entropy",), n, where) if obj.get("entropy") is not None else None
    is_masked = _bools(obj["is_masked"], ("is_masked",), n, where, optional=True) if "is_masked" in obj else None
    return TokenSequence(mask, _floats(obj["advantages"], ("advantages",), n, where),
                         _floats(obj["inference_logprobs"], ("inference_logprobs",), n, where),
                         _floats(obj["trainer_logprobs"], ("trainer_logprobs",), n, where), entropy, is_masked, None)


def read_prime_rl(path: Path, step: int, where: str) -> Iterator[TokenSequence]:
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            at = f"{where} line {number}"
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise TokenExportError(at, "", f"not JSON: {exc}") from None
            yield prime_rl_sequence(obj, step, at)


__all__ = ["ExportFile", "TokenExportError", "TokenSequence", "find_token_exports", "read_prime_rl"]
