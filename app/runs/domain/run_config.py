"""What each run was configured with, and what differs between runs (issue 50's compare).

The run store keeps a run's trainer_state.json, its recorded steps (uploads), the numbers derived from its files and,
when its folder had one, its `training_args.bin` read as plain fields (the pickled GRPOConfig, never unpickled as it
is: domain/training_args.py). So a stored run's configuration comes from what is kept, and the page says which:

- a recorded step's record carries the trainer's own config in TRL's names (`framework_config`: beta, epsilon,
  loss_type, num_generations, …; the recorder copies GRPOConfig's fields), else the app's names (`config`), with the
  framework's version and the model's name;
- training_args.bin's fields (every GRPOConfig field: beta, epsilon, loss_type, learning_rate, …), for a run that
  recorded no step the only place its β or ε is written;
- trainer_state.json's own top-level fields (train_batch_size, max_steps, logging_steps, save_steps, eval_steps,
  num_train_epochs): Trainer copies them from the TrainingArguments.

A key one source lacks is not "different": a key is compared among the runs that have it. `diff` splits the keys into
those whose values differ, those equal in every run, and those only some runs have (equal where known).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.runs.domain.training_args import TrainingArgs

# trainer_state.json's fields Trainer copies from its TrainingArguments (transformers' TrainerState)
STATE_FIELDS = ("train_batch_size", "max_steps", "num_train_epochs", "logging_steps", "eval_steps", "save_steps")
NONE_FOUND = "none found (no recorded step and no config field in trainer_state.json)"


@dataclass(frozen=True)
class RunConfig:
    values: dict[str, Any]  # key -> a plain value (str, number, bool, None, or a list/dict of them)
    sources: tuple[str, ...] = ()  # where each part came from, in words; () when nothing was found

    @property
    def source(self) -> str:
        return "; ".join(self.sources) if self.sources else NONE_FOUND


def from_record(step: int, framework: str, version: str, model: str, framework_config: Mapping[str, Any],
                app_config: Mapping[str, Any]) -> RunConfig:
    """A recorded step's config: the trainer's own (`framework_config`) when the recorder kept it, else the record's
    `config` (the app's names for the same conventions)."""
    own = bool(framework_config)
    values = dict(framework_config if own else app_config)
    values |= {"framework": f"{framework} {version}".strip(), "model": model}
    what = "framework_config" if own else "config"
    return RunConfig(values, (f"from step {step}'s step record (its {what})",))


def from_state(state: Mapping[str, Any]) -> RunConfig:
    """trainer_state.json's config fields (those present and not null)."""
    values = {k: state[k] for k in STATE_FIELDS if state.get(k) is not None}
    if not values:
        return RunConfig({})
    return RunConfig(values, (f"from trainer_state.json's {', '.join(values)}",))


def from_training_args(args: TrainingArgs) -> RunConfig:
    return RunConfig(dict(args.fields), (f"from training_args.bin ({args.class_name.rsplit('.', 1)[-1]})",))


def from_kept(kept: Mapping[str, Any] | None) -> RunConfig:
    """What the run store kept of the run's training_args.bin when its folder was opened (engine/run_opening.py)."""
    if not kept or not isinstance(kept.get("fields"), dict):
        return RunConfig({})
    return from_training_args(TrainingArgs(str(kept.get("class", "")), dict(kept["fields"])))


def merged(*parts: RunConfig) -> RunConfig:
    """The parts joined; a key the first part has is not overwritten (the record's own config wins)."""
    values: dict[str, Any] = {}
    sources: list[str] = []
    for part in parts:
        values |= {k: v for k, v in part.values.items() if k not in values}
        sources.extend(part.sources)
    return RunConfig(values, tuple(sources))


def _key(value: Any) -> str:
    """A value as compared: 0.04 and 0.04000 are one, a float NaN equals itself, a list or dict by its JSON."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "nan" if isinstance(value, float) and math.isnan(value) else repr(float(value))
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class ConfigRow:
    key: str
    values: tuple[Any, ...]  # one per run; MISSING where that run's config has no such key


@dataclass(frozen=True)
class ConfigDiff:
    differ: tuple[ConfigRow, ...]  # keys whose values differ between the runs that have them
    same: tuple[ConfigRow, ...]  # keys every run has, equal in all
    partial: tuple[ConfigRow, ...] = field(default=())  # keys only some runs have, equal where they have them


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def diff(configs: Sequence[RunConfig]) -> ConfigDiff:
    """Every key of any run's config, sorted into what differs, what is the same and what only some runs say."""
    keys = sorted({k for c in configs for k in c.values})
    differ, same, partial = [], [], []
    for key in keys:
        values = tuple(c.values.get(key, MISSING) for c in configs)
        known = [v for v in values if v is not MISSING]
        row = ConfigRow(key, values)
        if len({_key(v) for v in known}) > 1:
            differ.append(row)
        elif len(known) == len(values):
            same.append(row)
        else:
            partial.append(row)
    return ConfigDiff(tuple(differ), tuple(same), tuple(partial))


def shown(value: Any) -> str:
    """A config value as the page writes it."""
    if value is MISSING:
        return "—"
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


__all__ = ["MISSING", "NONE_FOUND", "STATE_FIELDS", "ConfigDiff", "ConfigRow", "RunConfig", "diff", "from_record",
           "from_kept", "from_state", "from_training_args", "merged", "shown"]
