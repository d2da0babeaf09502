"""A training run's logged metrics over all its steps (issue 34), read from TRL's `trainer_state.json`.

The record kind opens one recorded step; a run is many steps, and what practitioners debug is a run
("KL spiked at 312", "clip ratio has been 0 since the start"). TRL's Trainer writes its whole
`log_history` into `trainer_state.json` in every checkpoint and at the end of training: one JSON
object per logging step, `{"step": 3, "epoch": …, "loss": …, "reward": …, "kl": …, "entropy": …,
"clip_ratio/region_mean": …, "completions/clipped_ratio": …, "frac_reward_zero_std": …, …}`, then one
closing entry of the whole run (`train_runtime`, `train_loss`, …). Evaluation entries (`eval_*` keys)
share a step with the training entry they follow: one step's entries are merged.

Refused by JSON path (`log_history[3].step: …`), never guessed: a log_history that is not a list, an
entry that is not an object, a step that is not a non-negative integer or that goes back, a value that
is not a number, two entries of one step that disagree on a metric. NaN and ±Infinity are kept: TRL
writes a diverged loss as `NaN`, and that is a finding, not a broken file.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.domain.json_path import render_loc

SOURCE = "trainer_state.json"
# The keys of the closing entry TRL's Trainer appends after the last step (transformers' Trainer.train)
SUMMARY_KEYS = frozenset({"train_runtime", "train_loss", "train_samples_per_second", "train_steps_per_second",
                          "total_flos"})
NOT_METRICS = frozenset({"step"})


class RunLogError(ValueError):
    """A refused run log; `path` is the JSON path of the problem."""

    def __init__(self, path: str, message: str, source: str = SOURCE):
        self.source, self.path, self.message = source, path, message
        super().__init__(f"{source}: {path or '$'}: {message}")


@dataclass(frozen=True)
class RunLog:
    """Every logged metric of a run, aligned on its logged steps."""
    source: str
    steps: tuple[int, ...]  # the logged steps, increasing
    metrics: dict[str, tuple[float | None, ...]]  # name -> its value at each logged step (None: not logged there)
    summary: dict[str, float]  # the closing entry's numbers (train_runtime, train_loss, ...); {} when absent
    global_step: int | None  # the trainer's own count, when the file has it
    logging_steps: int | None
    # Derived values kept with the log (it never changes once read): a 10,000-step run's page asks for each
    # metric's series several times and its findings once per view; built once here, not per request. Not part
    # of the log's identity (compare=False), and not copied by dataclasses.replace (init=False).
    _memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def series(self, name: str) -> tuple[tuple[int, float], ...]:
        """(step, value) where `name` was logged, in step order."""
        return self.memo(("series", name), lambda: tuple(
            (s, v) for s, v in zip(self.steps, self.metrics[name], strict=True) if v is not None))

    def memo(self, key: Any, make: Any) -> Any:
        """`make()`, computed once per log and key (a value derived from the log alone: the log is immutable).
        Two threads may both compute it the first time; either result is the same."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = make()
            return value

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.metrics)


def _number(value: Any, path: tuple[int | str, ...]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunLogError(render_loc(path), f"expected a number, got {_kind(value)}")
    return float(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(type(value),
                                                                                       type(value).__name__)


def _step(value: Any, path: tuple[int | str, ...]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RunLogError(render_loc(path), f"expected a non-negative integer step, got {json.dumps(value)}")
    return value


def _optional_int(state: Mapping[str, Any], key: str) -> int | None:
    value = state.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunLogError(key, f"expected an integer, got {_kind(value)}")
    return value


def read_trainer_state(state: Any, source: str = SOURCE) -> RunLog:
    """The run log of a parsed `trainer_state.json` (or its bytes/text)."""
    if isinstance(state, (bytes, bytearray, str)):
        try:
            state = json.loads(state)
        except (ValueError, RecursionError) as exc:
            raise RunLogError("", f"not JSON: {exc}", source) from None
    if not isinstance(state, Mapping):
        raise RunLogError("", f"expected an object (TRL's trainer_state.json), got {_kind(state)}", source)
    history = state.get("log_history")
    if history is None:
        raise RunLogError("log_history", "missing: a trainer_state.json holds every logged step there", source)
    if not isinstance(history, list):
        raise RunLogError("log_history", f"expected a list of logged steps, got {_kind(history)}", source)
    by_step: dict[int, dict[str, float]] = {}
    summary: dict[str, float] = {}
    last = -1
    for i, entry in enumerate(history):
        where: tuple[int | str, ...] = ("log_history", i)
        if not isinstance(entry, Mapping):
            raise RunLogError(render_loc(where), f"expected an object, got {_kind(entry)}", source)
        if "step" not in entry:
            raise RunLogError(render_loc((*where, "step")), "missing", source)
        step = _step(entry["step"], (*where, "step"))
        if step < last:
            raise RunLogError(render_loc((*where, "step")), f"{step} after {last}: steps must not go back", source)
        last = step
        numbers = {key: _number(value, (*where, key)) for key, value in entry.items() if key not in NOT_METRICS}
        if SUMMARY_KEYS & numbers.keys():
            summary.update(numbers)
            continue
        merged = by_step.setdefault(step, {})
        for key, value in numbers.items():
            if key in merged and not _same(merged[key], value):
                raise RunLogError(render_loc((*where, key)),
                                  f"{value!r} disagrees with {merged[key]!r} logged for step {step} before", source)
            merged[key] = value
    steps = tuple(sorted(by_step))
    names = list(dict.fromkeys(k for s in steps for k in by_step[s]))
    metrics = {name: tuple(by_step[s].get(name) for s in steps) for name in names}
    return RunLog(source, steps, metrics, summary, _optional_int(state, "global_step"),
                  _optional_int(state, "logging_steps"))


def with_metrics(log: RunLog, extra: Mapping[int, Mapping[str, float]]) -> RunLog:
    """The log with more metrics at their steps (numbers derived from the run's per-token or per-sample files,
    `tokens/…`, `samples/…`): steps only they have are added; a name the log has already is not overwritten."""
    if not extra:
        return log
    steps = tuple(sorted(set(log.steps) | set(extra)))
    at = {s: i for i, s in enumerate(log.steps)}
    metrics = {name: tuple(values[at[s]] if s in at else None for s in steps) for name, values in log.metrics.items()}
    names = [n for n in dict.fromkeys(k for s in sorted(extra) for k in extra[s]) if n not in metrics]
    for name in names:
        metrics[name] = tuple(extra.get(s, {}).get(name) for s in steps)
    return RunLog(log.source, steps, metrics, log.summary, log.global_step, log.logging_steps)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


__all__ = ["RunLog", "RunLogError", "read_trainer_state", "with_metrics"]
