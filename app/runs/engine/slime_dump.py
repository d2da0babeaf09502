"""slime's train dumps (`--dump-details DIR` -> `DIR/train_data/{rollout_id}.pt`) read into token sequences.

A dump is a torch.save file, so this reader sits in the engine (the domain knows no torch); the format, its
source and the refusals are described in domain/token_exports.py. Read with `weights_only=True`: tensors, numbers,
strings, lists and dicts only, never arbitrary pickled objects. The per-rank layout of before format 2 shares
`sample_sequence` and `load_plain` (engine/slime_ranks.py), as do the rollout dumps (engine/slime_rollouts.py).
"""
from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.domain.json_path import render_loc
from app.runs.domain.token_exports import TokenExportError, TokenSequence

SLIME_FORMAT = 2


Loc = tuple[int | str, ...]


def response_values(value: Any, loc: Loc, where: str, n: int | None = None) -> np.ndarray:
    """One value per response token as float64: a 1-D tensor (or list of numbers) of `n` values."""
    if isinstance(value, list):
        try:
            value = torch.tensor(value, dtype=torch.float64)
        except (TypeError, ValueError):
            raise TokenExportError(where, render_loc(loc), "expected a list of numbers") from None
    if not isinstance(value, torch.Tensor) or value.dim() != 1:
        raise TokenExportError(where, render_loc(loc), "expected a 1-D tensor (one value per response token)")
    if n is not None and value.numel() != n:
        raise TokenExportError(where, render_loc(loc), f"{value.numel()} values, the response has {n}")
    return value.detach().to(torch.float64).numpy()


REQUIRED = ("loss_masks", "advantages", "rollout_log_probs", "log_probs")


def sample_sequence(sample: Mapping[str, Any], at: Callable[[str], Loc], where: str) -> TokenSequence:
    """A response's tensors (slime's key names, both layouts) as a TokenSequence; `at(key)` is a field's path."""
    for key in REQUIRED:
        if sample.get(key) is None:
            raise TokenExportError(where, render_loc(at(key)), "missing (slime dumps it with --dump-details once "
                                                               "the step computed it)")
    mask = response_values(sample["loss_masks"], at("loss_masks"), where)
    n = mask.size
    if not np.isin(mask, (0, 1)).all():
        raise TokenExportError(where, render_loc(at("loss_masks")), "expected 0/1 per response token")
    entropy = sample.get("entropy")
    truncated = sample.get("truncated")
    return TokenSequence(mask.astype(bool), response_values(sample["advantages"], at("advantages"), where, n),
                         response_values(sample["rollout_log_probs"], at("rollout_log_probs"), where, n),
                         response_values(sample["log_probs"], at("log_probs"), where, n),
                         None if entropy is None else response_values(entropy, at("entropy"), where, n), None,
                         None if truncated is None else bool(truncated))


def slime_sequence(sample: Any, i: int, where: str) -> TokenSequence:
    if not isinstance(sample, Mapping):
        raise TokenExportError(where, render_loc(("samples", i)), "expected a dict (one training sample)")
    return sample_sequence(sample, lambda key: ("samples", i, key), where)


def load_plain(path: Path, where: str) -> Any:
    """torch.load with weights_only=True: a file that pickles anything but tensors and plain values is refused
    unopened, so nothing in it runs."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
        raise TokenExportError(where, "", f"not a torch file of tensors and plain values: {str(exc)[:200]}") from None


def read_slime(path: Path, step: int, where: str) -> Iterator[TokenSequence]:
    dump = load_plain(path, where)
    if not isinstance(dump, Mapping) or dump.get("format_version") != SLIME_FORMAT:
        got = dump.get("format_version") if isinstance(dump, Mapping) else type(dump).__name__
        raise TokenExportError(where, "format_version", f"{got!r}: this reader knows slime's train dump format "
                                                        f"{SLIME_FORMAT}")
    if dump.get("rollout_id") != step:
        raise TokenExportError(where, "rollout_id", f"{dump.get('rollout_id')!r} in a file named for {step}")
    samples = dump.get("samples")
    if not isinstance(samples, list):
        raise TokenExportError(where, "samples", "expected a list of training samples")
    for i, sample in enumerate(samples):
        yield slime_sequence(sample, i, where)


__all__ = ["REQUIRED", "SLIME_FORMAT", "load_plain", "read_slime", "response_values", "sample_sequence"]
