"""The Inspector's numbers for a node of a recorded step: its tensor and ∂loss/∂tensor over the
whole step (summaries over the real tokens) and on the window on screen (the values themselves).
A 65,536-token tensor is never printed whole; the API sends it (`?node=`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.kinds.step_record.engine.step import Recomputed, node_key
from app.views.tokens.window import WINDOW

NO_GRAD = {"input": "the rewards are data: no gradient reaches them",
           "advantages": "the advantages are constants of the loss (the framework's own, or recomputed from "
                         "rewards): no gradient reaches them"}


@dataclass(frozen=True)
class Stats:
    count: int
    min: float
    max: float
    mean: float
    norm: float


@dataclass(frozen=True)
class NodeView:
    node_id: str
    shape: tuple[int, ...]
    value: Stats | None
    grad: Stats | None
    no_grad_reason: str | None
    window_values: tuple[float, ...]  # the window's tokens (a per-completion tensor: its completion's value)
    window_grads: tuple[float, ...]
    window_label: str

    @property
    def count_words(self) -> str:
        """What the statistics run over: tokens for a (N, T) tensor, completions for (N,), the step's one."""
        n = self.value.count if self.value is not None else 0
        if len(self.shape) == 2:
            return f"{n:,} value{'s' if n != 1 else ''} (one per real token)"
        if len(self.shape) == 1:
            return f"{n:,} value{'s' if n != 1 else ''} (one per completion)"
        return "1 value (the step's)"


def _stats(x: np.ndarray, mask: np.ndarray | None) -> Stats:
    v = x[mask > 0] if mask is not None and mask.shape == x.shape else x.reshape(-1)
    if v.size == 0:
        return Stats(0, 0.0, 0.0, 0.0, 0.0)
    return Stats(int(v.size), float(v.min()), float(v.max()), float(v.mean()), float(np.linalg.norm(v)))


def build_node_view(result: Recomputed, node_id: str, row: int, at: int) -> NodeView | None:
    key = node_key(node_id)
    if key not in result.nodes:
        return None
    value, grad = result.nodes[key]
    lengths = [len(c.logp) for c in result.completions]
    width = max(lengths)
    mask = np.zeros((len(lengths), width))
    for k, c in enumerate(result.completions):
        mask[k, : len(c.mask)] = c.mask
    n = lengths[row]
    end = min(at + WINDOW, n)
    if value.ndim == 2:
        window_values = tuple(float(v) for v in value[row, at:end])
        window_grads = tuple(float(v) for v in grad[row, at:end]) if grad is not None else ()
        label = f"completion row {row}, tokens {at + 1}–{end}"
    elif value.ndim == 1:
        window_values = (float(value[row]),)
        window_grads = (float(grad[row]),) if grad is not None else ()
        label = f"completion row {row}"
    else:
        window_values = (float(value),)
        window_grads = (float(grad),) if grad is not None else ()
        label = "the step"
    return NodeView(node_id, tuple(value.shape), _stats(value, mask), _stats(grad, mask) if grad is not None else None,
                    None if grad is not None else NO_GRAD.get(key, "no gradient reaches this node"),
                    window_values, window_grads, label)
