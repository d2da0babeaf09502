"""slime's rollout dumps (`--dump-details DIR` -> `DIR/rollout_data/{rollout_id}.pt`) read into per-step numbers
(`samples/…`): the groups, their rewards, and so the share of tied groups, which slime's train dumps cannot give
(they hold no group id).

From slime's own writer (THUDM/slime at 624b824): `save_debug_rollout_data`
(slime/observability/rollout_data_utils.py) saves `{"rollout_id": rollout_id, "samples": [sample.to_dict() for
sample in data]}` for every training rollout (`eval_{id}.pt` for evaluations, not read here), and `Sample.to_dict`
(slime/utils/types.py) is the dataclass's `__dict__` with `status` as its string value ("completed", "truncated",
"aborted", …) and `spec_info` / `prefix_cache_info` as dicts: plain values and tensors, which the engine loads with
`weights_only=True` (engine/slime_rollouts.py) and hands here as plain mappings (the domain knows no torch).

Read per sample: `group_index` (the data source gives a prompt's n_samples_per_prompt copies one group_index,
slime/rollout/data_source.py `get_samples`; slime's own zero-std metric groups by it, rollout_metrics.py
`_compute_zero_std_metrics`), `reward` (a number, or a dict when the run picks one of its keys with --reward-key,
which the dump does not record), `status`, `response_length`. Dumps from before Sample had group_index (c7dc52e,
October 2025) group by `prompt`, as verl's dumps are grouped (domain/verl_rollouts.py).

A group is tied when it has two or more scored samples and their rewards are all equal: GRPO's advantage
(r − mean) / (std + ε) is then 0 for every member, so the group gives no gradient. `samples/tied_group_share` is
the share of such groups, `samples/tied_sample_share` the share of the step's samples in them, the names verl's
dumps use, so the same finding (run_findings.tied_groups) reads both. With dict rewards no tie is counted (which
key was the reward is not in the file); each numeric key's mean is said instead.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.domain.json_path import render_loc

FOLDER = "rollout_data"
_NAME = re.compile(r"([0-9]+)\.pt\Z")  # eval_{id}.pt holds an evaluation, no training step


class SlimeSamplesError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        self.path, self.message = path, message
        super().__init__(f"{path or '$'}: {message}")


def rollout_dump_files(root: Path) -> list[tuple[int, Path]]:
    """slime's rollout dumps in a run directory as (rollout id, path), by id; `eval_{id}.pt` left out."""
    folder = root / FOLDER
    if not folder.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name)) and p.is_file())


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _reward(value: Any, loc: tuple[int | str, ...]) -> float | dict[str, float]:
    if value is None:
        return math.nan
    if isinstance(value, Mapping):
        return {str(k): x for k, v in value.items() if (x := _number(v)) is not None and math.isfinite(x)}
    number = _number(value)
    if number is None or math.isinf(number):
        raise SlimeSamplesError(render_loc(loc), f"expected a number, a dict or null, got {type(value).__name__}")
    return number


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return math.nan
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _group_keys(samples: list[Mapping[str, Any]]) -> list[str]:
    if all(isinstance(s.get("group_index"), int) and not isinstance(s.get("group_index"), bool) for s in samples):
        return [f"g{s['group_index']}" for s in samples]
    return ["p" + json.dumps(s.get("prompt"), sort_keys=True, default=str) for s in samples]


def rollout_metrics(dump: Any, rollout_id: int) -> dict[str, float]:
    """One rollout dump's numbers (`samples/…`). Raises SlimeSamplesError naming the field."""
    if not isinstance(dump, Mapping):
        raise SlimeSamplesError("", f"expected a dict (rollout_id, samples), got {type(dump).__name__}")
    if dump.get("rollout_id") != rollout_id:
        raise SlimeSamplesError("rollout_id", f"{dump.get('rollout_id')!r} in a file named for {rollout_id}")
    samples = dump.get("samples")
    if not isinstance(samples, list):
        raise SlimeSamplesError("samples", "expected a list of Sample.to_dict() dicts")
    for i, s in enumerate(samples):
        if not isinstance(s, Mapping):
            raise SlimeSamplesError(render_loc(("samples", i)), "expected a dict (Sample.to_dict())")
        if "reward" not in s:
            raise SlimeSamplesError(render_loc(("samples", i, "reward")), "missing: Sample.to_dict() writes it")
    out: dict[str, float] = {"samples/count": float(len(samples))}
    if not samples:
        return out
    rewards = [_reward(s["reward"], ("samples", i, "reward")) for i, s in enumerate(samples)]
    lengths = [x for s in samples if (x := _number(s.get("response_length"))) is not None]
    out["samples/truncated_share"] = sum(s.get("status") == "truncated" for s in samples) / len(samples)
    if lengths:
        out["samples/response_length_mean"] = math.fsum(lengths) / len(lengths)
    keys = _group_keys(samples)
    out["samples/groups"] = float(len(set(keys)))
    if any(isinstance(r, dict) for r in rewards):
        per_key: dict[str, list[float]] = {}
        for r in rewards:
            for k, v in (r.items() if isinstance(r, dict) else ()):
                per_key.setdefault(k, []).append(v)
        return out | {f"samples/rewards/{k}/mean": math.fsum(v) / len(v) for k, v in sorted(per_key.items())}
    scalars = [float(r) for r in rewards if not isinstance(r, dict)]
    scored = [r for r in scalars if not math.isnan(r)]
    out["samples/unscorable_share"] = 1 - len(scored) / len(samples)
    if scored:
        out["samples/reward_mean"] = math.fsum(scored) / len(scored)
        if len(scored) > 1:
            out["samples/reward_std"] = _std(scored)
    groups: dict[str, list[float]] = {}
    for key, r in zip(keys, scalars, strict=True):
        if not math.isnan(r):
            groups.setdefault(key, []).append(r)
    multi = [g for g in groups.values() if len(g) > 1]  # one scored response has no spread to tie
    if multi:
        tied = [g for g in multi if max(g) == min(g)]
        out["samples/tied_group_share"] = len(tied) / len(multi)
        out["samples/tied_sample_share"] = sum(len(g) for g in tied) / len(samples)
    return out


__all__ = ["FOLDER", "SlimeSamplesError", "rollout_dump_files", "rollout_metrics"]
