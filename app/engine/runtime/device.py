"""Which torch device runs the engine: `auto`, `cpu` or `cuda`."""
from __future__ import annotations

import torch


class DeviceUnavailable(RuntimeError):
    pass


def set_threads(n: int) -> None:
    """torch's intra-op threads; for tensors this small more threads only add overhead."""
    torch.set_num_threads(n)


def resolve_device(requested: str) -> str:
    """`auto` prefers CUDA when present; an explicit `cuda` without CUDA fails fast."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("--device cuda was requested but torch.cuda.is_available() is False "
                                f"(torch {torch.__version__}); use --device cpu or auto")
    if requested not in ("cpu", "cuda"):
        raise DeviceUnavailable(f"unknown device {requested!r}: choose auto, cpu or cuda")
    return requested
