"""verl's per-sample dump (issue 34): `trainer.rollout_data_dir=DIR` writes `DIR/{global_steps}.jsonl`, read into
per-step numbers (`samples/…`) that join the run's metrics.

From verl's own writer, `RayPPOTrainer._log_rollout_data` and `_write_generations` (verl/trainer/ppo/ray_trainer.py,
verl 0.9.1, the peers venv's): one line per rollout, `json.dumps({"input", "output", "gts", "score", "step",
**reward_extra_infos}, ensure_ascii=False, default=str)`: `input` and `output` the decoded prompt and response
(special tokens skipped), `score` the sum over the response of `token_level_scores` (the reward before any KL
penalty), `step` global_steps on every line, then each reward-extra-info list as long as the batch (`acc`, `pred`,
`request_id`, …). The batch is the rollout's: a prompt's n responses share its `input`, so a GRPO group is the lines of
one input.

Where it lands is the user's choice; a run directory's folder named `rollout_data_dir`, `rollout_data` or
`rollouts` holding `{step}.jsonl` files is read (slime's `rollout_data/` holds `.pt` dumps: slime's reader opens
those, engine/slime_rollouts.py). A
sequence-level source: no token ids, no log-probs, no advantage (`LACKS`). Streamed line by line; a file refused names
its path, line and field, and its step is left out.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.runs.domain.trl_completions import CompletionsRead

FOLDERS = ("rollout_data_dir", "rollout_data", "rollouts")
LACKS = ("per-token log-probs (one line per response, decoded text): no train/inference mismatch, no ratio, clip "
         "or KL recomputed", "advantages: verl dumps the score, not the advantage (a tied group's is 0 under GRPO)",
         "token lengths: a response's length is counted in characters")
_NAME = re.compile(r"(\d+)\.jsonl\Z")
_SKIP = {"input", "output", "gts", "score", "step"}


class _Refused(Exception):
    """args: (where, why)"""


@dataclass
class _Stream:
    """One step's values (NaN skipped), kept for an exact two-pass mean and std (Bessel-corrected, as torch.std):
    a step is one rollout batch, thousands of numbers, not the file's text."""
    n: int = 0
    values: list[float] = field(default_factory=list)

    def add(self, x: float) -> None:
        if math.isnan(x):
            return
        self.n += 1
        self.values.append(x)

    @property
    def mean(self) -> float:
        return math.fsum(self.values) / self.n if self.n else math.nan

    def std(self) -> float:
        if self.n < 2:
            return math.nan
        m = self.mean
        return math.sqrt(math.fsum((v - m) ** 2 for v in self.values) / (self.n - 1))


@dataclass
class _Step:
    rows: int = 0
    unscorable: int = 0
    score: _Stream = field(default_factory=_Stream)
    chars: _Stream = field(default_factory=_Stream)
    extra: dict[str, _Stream] = field(default_factory=dict)
    groups: dict[str, list[float]] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        out = {"samples/count": float(self.rows)}
        if not self.rows:
            return out
        out |= {"samples/unscorable_share": self.unscorable / self.rows, "samples/groups": float(len(self.groups))}
        if self.score.n:
            out |= {"samples/reward_mean": self.score.mean, "samples/reward_std": self.score.std()}
        scored = [g for g in (list(filter(lambda v: not math.isnan(v), g)) for g in self.groups.values()) if g]
        multi = [g for g in scored if len(g) > 1]
        if multi:  # a group of one has no spread to tie: GRPO's std is undefined there
            out["samples/tied_group_share"] = sum(max(g) == min(g) for g in multi) / len(multi)
            out["samples/tied_sample_share"] = sum(len(g) for g in multi if max(g) == min(g)) / self.rows
        for name, m in self.extra.items():
            if m.n:
                out[f"samples/rewards/{name}/mean"] = m.mean
        return out | {"samples/completion_chars_mean": self.chars.mean}


def rollout_files(root: Path) -> list[Path]:
    """The run directory's verl rollout dumps, by folder then step."""
    found: list[Path] = []
    for name in FOLDERS:
        folder = root / name
        if folder.is_dir():
            found.extend(sorted((p for p in folder.iterdir() if _NAME.match(p.name) and p.is_file()),
                                key=lambda p: int(_NAME.match(p.name).group(1))))  # type: ignore[union-attr]
    return found


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _line(obj: Any, where: str, step: int, acc: _Step) -> None:
    if not isinstance(obj, dict):
        raise _Refused(where, f"expected an object, got {type(obj).__name__}")
    for name in ("input", "output", "score", "step"):
        if name not in obj:
            raise _Refused(f"{where}: {name}", "missing: verl's writer writes it on every line")
    for name in ("input", "output"):
        if not isinstance(obj[name], str):
            raise _Refused(f"{where}: {name}", f"expected the decoded text, got {type(obj[name]).__name__}")
    if isinstance(obj["step"], bool) or not isinstance(obj["step"], int) or obj["step"] != step:
        raise _Refused(f"{where}: step", f"{obj['step']!r} in the file of step {step}")
    score = obj["score"]
    if score is None:
        value = math.nan
    else:
        got = _number(score)
        if got is None or math.isinf(got):
            raise _Refused(f"{where}: score", f"expected a number, got {score!r}")
        value = got
    acc.rows += 1
    acc.unscorable += math.isnan(value)
    acc.score.add(value)
    acc.chars.add(float(len(obj["output"])))
    acc.groups.setdefault(obj["input"], []).append(value)
    for name, v in obj.items():
        number = _number(v) if name not in _SKIP else None
        if number is not None and math.isfinite(number):
            acc.extra.setdefault(name, _Stream()).add(number)


def _read(path: Path, where: str, step: int, acc: _Step) -> None:
    with path.open("rb") as f:
        for i, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)  # verl writes NaN for a NaN score (json.dumps's default): read back as NaN
            except ValueError as exc:
                raise _Refused(f"{where}: line {i}", f"not JSON: {exc}") from None
            _line(obj, f"{where}: line {i}", step, acc)


def read_rollouts_dir(root: Path) -> CompletionsRead:
    """Every verl rollout dump of a run directory, one step per file (from its name, checked against each line's
    `step`). A refused file leaves its step out and says why; the result is the same shape as TRL's tables'."""
    metrics: dict[int, dict[str, float]] = {}
    refused: list[tuple[str, str]] = []
    files = rollout_files(root)
    for path in files:
        where = str(path.relative_to(root))
        step = int(_NAME.match(path.name).group(1))  # type: ignore[union-attr]
        if step in metrics:
            refused.append((where, f"a second file of step {step}"))
            continue
        acc = _Step()
        try:
            _read(path, where, step, acc)
        except _Refused as exc:
            refused.append((exc.args[0], f"{exc.args[1]} (step {step} left out)"))
            continue
        except OSError as exc:
            refused.append((where, f"cannot be read: {exc.strerror or exc} (step {step} left out)"))
            continue
        metrics[step] = acc.metrics()
    return CompletionsRead(dict(sorted(metrics.items())), len(files), tuple(refused), LACKS)


__all__ = ["FOLDERS", "LACKS", "read_rollouts_dir", "rollout_files"]
