"""A stored run's derived document (run_store.py): the numbers its per-token and per-sample files gave, step -> name ->
value, joined to its log when it is read, and its configuration as its folder gave it (`config`). One JSON document, a
sidecar file or a database row, so a run's derived data needs no table of its own and goes with the run."""
from __future__ import annotations

import json
from typing import Any

Steps = dict[int, dict[str, float]]  # step -> name -> value


def merged_steps(derived: Steps, metrics: Steps) -> Steps:
    """`metrics` joined into `derived` (a name at a step read again takes the newer value)."""
    for step, values in metrics.items():
        derived[step] = derived.get(step, {}) | values
    return derived


# The derived document's one key that is not a step: the run's configuration as read from its folder (its
# training_args.bin's plain fields, domain/training_args.py), which compare says the runs differ in. Kept in the
# same document (file or row) as the derived numbers, so it needs no table of its own and goes with the run.
CONFIG_KEY = "config"


def derived_json(derived: dict[int, dict[str, float]], config: dict[str, Any] | None = None) -> str:
    doc: dict[str, Any] = {str(s): v for s, v in sorted(derived.items())}
    if config is not None:
        doc[CONFIG_KEY] = config
    return json.dumps(doc, default=str)


def parsed_derived(text: str) -> dict[int, dict[str, float]]:
    return {int(step): {str(k): float(v) for k, v in values.items()} for step, values in json.loads(text).items()
            if step != CONFIG_KEY}


def parsed_config(text: str | None) -> dict[str, Any] | None:
    config = None if text is None else json.loads(text).get(CONFIG_KEY)
    return config if isinstance(config, dict) else None


def merged_text(old: str | None, metrics: dict[int, dict[str, float]],
                 config: dict[str, Any] | None = None) -> str:
    """The derived document `old` with `metrics` joined and its config kept, or replaced by `config`."""
    derived = {} if old is None else parsed_derived(old)
    return derived_json(merged_steps(derived, metrics), config if config is not None else parsed_config(old))
