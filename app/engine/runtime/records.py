"""One node's recorded tensor: what every kind's engine hands the views, keyed by node id."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeRecord:
    shape: tuple[int, ...] | None
    dtype: str | None
    values: list | float | None
    grad: list | float | None
    no_grad_reason: str | None = None
    # Set when the node takes no part in the computation shown (e.g. the clip
    # under an SFT stage): no numbers are invented for it.
    inactive_reason: str | None = None

    @classmethod
    def inactive(cls, reason: str) -> NodeRecord:
        return cls(None, None, None, None, None, reason)
