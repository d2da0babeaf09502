"""A run's per-token files read into per-step numbers (issue 34), one file and one sequence at a time.

The numbers of each step (token_stats.py) join the run's logged metrics as metrics of their own (`tokens/…`), so
the explorer draws, zooms and links them as it does TRL's. A run directory with no trainer_state.json (prime-rl and
slime log to W&B, not to a file) is opened from them alone: `as_trainer_state` writes them in trainer_state.json's
shape, and that document is the run's stored file (content-addressed as any). Beside them, what each IS correction
would do to the step's gradient (`tokens/is_grad/…`, is_effect.py), from the same step's arrays, recomputed by the
shared token-level engine while the step is in memory.

A file refused (domain/token_exports.py and slime_dump.py name its path and field) leaves its whole step out: a
step from some of its ranks would be a different batch's statistics under the step's name.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.runs.domain.token_exports import (
    ExportFile,
    TokenExportError,
    TokenSequence,
    find_token_exports,
    read_prime_rl,
)
from app.runs.domain.token_stats import StepTokens
from app.runs.engine.is_effect import TrainedTokens, is_effect_metrics
from app.runs.engine.slime_dump import read_slime
from app.runs.engine.slime_ranks import read_slime_ranks
from app.runs.engine.slime_rollouts import read_slime_rollouts


@dataclass(frozen=True)
class TokenRun:
    metrics: dict[int, dict[str, float]]  # step -> tokens/… -> value
    sources: tuple[str, ...]  # "prime-rl", "slime"
    files: int  # per-token files, and slime's rollout dumps (rollout_data/: per-sample numbers of the same steps)
    refused: tuple[tuple[str, str], ...]  # (file, why)
    rollout_files: int = 0  # of `files`, slime's rollout dumps (said apart: they hold no tokens)

    @property
    def token_files(self) -> int:
        return self.files - self.rollout_files


def read_export(export: ExportFile, where: str) -> Iterator[TokenSequence]:
    if export.source == "prime-rl":
        return read_prime_rl(export.path, export.step, where)
    return read_slime(export.path, export.step, where)


def _step_sequences(step: int, files: list[ExportFile], label: Callable[[Path], str]) -> Iterator[TokenSequence]:
    """One step's sequences from all its files: slime's per-rank files are put back together as one batch
    (engine/slime_ranks.py); every other file is read on its own."""
    ranks = [f for f in files if f.rank is not None]
    if ranks and len(ranks) < len(files):
        raise TokenExportError(label(files[0].path), "", f"rollout {step} has both slime's format-2 dump and per-rank "
                                                         "dumps: two copies of one step, neither is chosen")
    if ranks:
        yield from read_slime_ranks(ranks, step, label)
        return
    for export in files:
        where = label(export.path)
        try:
            yield from read_export(export, where)
        except OSError as exc:
            raise TokenExportError(where, "", f"cannot be read: {exc.strerror or exc}") from None


def read_token_run(root: Path, label: Callable[[Path], str] = str) -> TokenRun:
    exports = find_token_exports(root)
    by_step: dict[int, list[ExportFile]] = {}
    for export in exports:
        by_step.setdefault(export.step, []).append(export)
    metrics: dict[int, dict[str, float]] = {}
    refused: list[tuple[str, str]] = []
    for step, files in sorted(by_step.items()):
        acc = StepTokens(response_only=all(f.source == "slime" for f in files))
        try:
            for seq in _step_sequences(step, files, label):
                acc.add(seq)
        except TokenExportError as exc:
            refused.append((exc.where, f"{exc.path or '$'}: {exc.message} (step {step} left out)"))
            continue
        if acc.sequences:
            metrics[step] = acc.metrics() | is_effect_metrics(TrainedTokens(*acc.trained()))
    # slime's rollout dumps: the groups and rewards of the same rollouts (samples/…), joined by rollout id
    rollouts = read_slime_rollouts(root, label)
    for step, values in rollouts.metrics.items():
        metrics[step] = metrics.get(step, {}) | values
    sources = {e.source for e in exports} | ({"slime"} if rollouts.files else set())
    return TokenRun(dict(sorted(metrics.items())), tuple(sorted(sources)), len(exports) + rollouts.files,
                    (*refused, *rollouts.refused), rollouts.files)


def as_trainer_state(metrics: dict[int, dict[str, float]], sources: tuple[str, ...]) -> bytes:
    """Per-step numbers read from a run's files as trainer_state.json's log_history: the stored file of a run that
    has no log (prime-rl and slime log to W&B; `sources` names what they came from)."""
    history = [{"step": step, **values} for step, values in sorted(metrics.items())]
    doc = {"log_history": history, "global_step": max(metrics, default=0),
           "written_by": f"GRPO walkthrough, from {' and '.join(sources)}"}
    return json.dumps(doc, indent=1, sort_keys=False).encode()


__all__ = ["TokenRun", "as_trainer_state", "read_export", "read_token_run"]
