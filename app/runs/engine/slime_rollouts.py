"""slime's rollout dumps (`DIR/rollout_data/{rollout_id}.pt`) loaded and read into per-step `samples/…` numbers.

The file is a torch.save, so it is loaded here, in the engine, with `weights_only=True` (tensors and plain values
only: nothing pickled runs; a dump holding other objects, images in `multimodal_inputs` say, is refused unopened),
and read by domain/slime_samples.py, where the format and its source are described. A refused file leaves its
step's `samples/…` out and says why; the step's per-token numbers, from train_data/, stand.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.runs.domain.slime_samples import SlimeSamplesError, rollout_dump_files, rollout_metrics
from app.runs.domain.token_exports import TokenExportError
from app.runs.engine.slime_dump import load_plain


@dataclass(frozen=True)
class SlimeRollouts:
    metrics: dict[int, dict[str, float]]  # rollout id -> samples/… -> value
    files: int
    refused: tuple[tuple[str, str], ...]  # (file, why)


def read_slime_rollouts(root: Path, label: Callable[[Path], str] = str) -> SlimeRollouts:
    files = rollout_dump_files(root)
    metrics: dict[int, dict[str, float]] = {}
    refused: list[tuple[str, str]] = []
    for rollout_id, path in files:
        where = label(path)
        try:
            metrics[rollout_id] = rollout_metrics(load_plain(path, where), rollout_id)
        except TokenExportError as exc:
            refused.append((where, f"{exc.path or '$'}: {exc.message} (its samples/… left out)"))
        except SlimeSamplesError as exc:
            refused.append((where, f"{exc.path or '$'}: {exc.message} (its samples/… left out)"))
    return SlimeRollouts(metrics, len(files), tuple(refused))


__all__ = ["SlimeRollouts", "read_slime_rollouts"]
