"""Which torch device runs the engine: `auto`, `cpu` or `cuda`."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class DeviceUnavailable(RuntimeError):
    pass


def set_threads(n: int) -> None:
    """torch's intra-op threads; for tensors this small more threads only add overhead."""
    torch.set_num_threads(n)


# torch's intra-op thread count belongs to the thread that sets it: with torch's OpenMP build (the one
# installed here) `torch.set_num_threads` sets the calling thread's OpenMP and MKL counts, plus a
# process-wide default that a thread adopts at its first parallel op (at::lazy_init_num_threads). So a
# job runner's thread can run a large model on every core while another lane's thread keeps one
# (tests/engine/test_threads.py), provided each runner thread pins its own count when it starts:
# otherwise it would adopt whatever default another thread last set.

def pin_threads(n: int) -> None:
    """Fix this thread's intra-op threads at `n`, whatever another thread sets later."""
    torch.get_num_threads()  # the lazy per-thread init runs now, not at a later op
    torch.set_num_threads(n)


def current_threads() -> int:
    return torch.get_num_threads()


@contextmanager
def intra_op_threads(n: int) -> Iterator[None]:
    """This thread's intra-op threads set to `n` inside, its own count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
