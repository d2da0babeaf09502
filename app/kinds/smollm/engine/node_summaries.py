"""The real step's recorded nodes reduced to what can ship (step_records.py), taken as the recording makes them.

A node of the real model is large ((G, L, 576) per activation, (G, L, 49,152) for the logits, ~1,800 over the
three copies), so no node is held longer than its summary needs:
- a node without a gradient (every node of the frozen old and reference copies) is summarised the moment the
  forward makes it (the tracer's `keep_value`) and never kept;
- a policy node is kept through the forward (the backward needs most of them anyway) and summarised in a hook
  on its tensor when ∂loss/∂node arrives, then let go of; one that no gradient reaches, after the backward;
- the head (outside the three Llamas, and each copy's `token_logprobs`) is kept and shipped whole.

Precision. The per-position reductions over the width (‖value‖, ‖∂loss/∂node‖: at most 49,152 squares) run
in float32 by torch's pairwise/cascade sums, and so do the per-dimension sums of |value| over the real
positions (at most G·L terms); every sum of non-negative terms, so without cancellation: the relative error
is ≲ log2(n)·2⁻²⁴ ≈ 1e-6 at worst and ~1e-7 as measured against the float64 sums this replaced
(tests/kinds/smollm/test_smollm_step.py). The node-wide norms combine the per-position ones in float64; the
node-wide mean (which may cancel) accumulates in float64 as before; min, max and max |grad| are exact.
A node holding a non-finite value takes the float64 path it always took.
"""
from __future__ import annotations

import dataclasses
import functools
from array import array

import torch

from app.engine.grpo.token_records import TensorSummary
from app.kinds.smollm.engine.step_records import HeadNode, Rows, WideNode

COPIES = ("policy", "old_policy", "reference_policy")
TOP_DIMS = 5
NO_GRAD_REASON = {
    "old_policy": "frozen: the old policy (the checkpoint) only supplies log π_old of the sampled tokens",
    "reference_policy": "frozen: the reference (the checkpoint) only supplies log π_ref",
    "advantages": "rewards are constants: no gradient flows into the advantages",
    "input": "token ids, the mask and the rewards are data, not parameters",
}
WIDE = torch.float64


def is_head(node_id: str) -> bool:
    """Outside the three Llamas, or a copy's own log-probs (the scorer's output, (G, T))."""
    scope = node_id.split("@", 1)[-1].split("#", 1)[0]
    copy = scope.split(".", 1)[0]
    return copy not in COPIES or scope == copy or scope == f"{copy}.token_logprobs"


def copy_of(node_id: str) -> str:
    """Which copy (or head module) a node id belongs to: `softmax@old_policy.blocks.1.attention#0` -> old_policy."""
    return node_id.split("@", 1)[-1].split("#", 1)[0].split(".", 1)[0]


def renamed_id(node_id: str, source: str, target: str) -> str:
    """`node_id` with its scope's first part `source` replaced by `target`."""
    function, at, rest = node_id.rpartition("@")
    scope = rest.split(".", 1)[0].split("#", 1)[0]
    assert scope == source, (node_id, source)
    return f"{function}{at}{target}{rest[len(source):]}"


def no_grad_reason(node_id: str) -> str:
    root = node_id.split("@", 1)[-1].split(".", 1)[0].split("#")[0]
    return NO_GRAD_REASON.get(root, "no gradient flows to this tensor")


def grad_of(tensor: torch.Tensor) -> torch.Tensor | None:
    return tensor.grad if tensor.requires_grad else None


def head_node(node_id: str, tensor: torch.Tensor) -> HeadNode:
    grad = grad_of(tensor)
    return HeadNode(node_id, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."),
                    tensor.detach().cpu().tolist(), None if grad is None else grad.detach().cpu().tolist(),
                    None if grad is not None else no_grad_reason(node_id))


def token_axis(tensor: torch.Tensor, groups: int, length: int) -> int | None:
    """1 for (G, L, W), 2 for (G, H, L, ·); None for a node without the token axis (not summarised)."""
    if tensor.dim() == 3 and tuple(tensor.shape[:2]) == (groups, length):
        return 1
    if tensor.dim() == 4 and tensor.shape[0] == groups and tensor.shape[2] == length:
        return 2
    return None


def _per_token(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    """(G, L, W): the token axis second, every other axis after the first flattened into the width."""
    moved = tensor.movedim(axis, 1)
    return moved.reshape(moved.shape[0], moved.shape[1], -1)


def _rows(t: torch.Tensor) -> Rows:
    """(G, L) as Rows: float64 (every float32 exactly), one flat array."""
    table = t.to(WIDE).cpu().contiguous()
    return Rows(array("d", table.numpy().tobytes()), table.shape[1])


def wide_node(node_id: str, tensor: torch.Tensor, positions: torch.Tensor,
              grad: torch.Tensor | None) -> WideNode | None:
    """Per position: ‖value‖ and ‖∂loss/∂node‖ over the width; the 5 widest dimensions by mean |value| over
    the real positions `positions` (G, L); the node's range, mean and norms. `grad` None: no gradient."""
    groups, length = positions.shape
    axis = token_axis(tensor, groups, length)
    if axis is None:
        return None
    values = _per_token(tensor.detach(), axis)  # (G, L, W)
    value_rows = torch.linalg.vector_norm(values, dim=-1)  # (G, L) float32
    grad_values = None if grad is None else _per_token(grad.detach(), axis)
    grad_rows = None if grad_values is None else torch.linalg.vector_norm(grad_values, dim=-1)
    finite = bool(torch.isfinite(value_rows).all()) and (grad_rows is None or bool(torch.isfinite(grad_rows).all()))
    if not finite:
        return _wide_node_float64(node_id, tensor, values, grad_values, positions, axis)
    lowest, highest = torch.aminmax(values)
    mean_abs = values[positions].abs().sum(dim=0) / int(positions.sum())  # (W,) over the real positions
    top = torch.topk(mean_abs, min(TOP_DIMS, mean_abs.numel()))
    grad_norm = grad_abs_max = None
    if grad_values is not None and grad_rows is not None:
        grad_norm = float(grad_rows.to(WIDE).square().sum().sqrt())
        low, high = torch.aminmax(grad_values)
        grad_abs_max = max(abs(float(low)), abs(float(high)))
    summary = TensorSummary(
        tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."), float(lowest), float(highest),
        float(values.mean(dtype=WIDE)), float(value_rows.to(WIDE).square().sum().sqrt()), grad_norm, grad_abs_max,
        None if grad is not None else no_grad_reason(node_id))
    return WideNode(node_id, tuple(tensor.shape), axis, _rows(value_rows),
                    None if grad_rows is None else _rows(grad_rows),
                    tuple((int(i), float(v)) for i, v in zip(top.indices, top.values, strict=True)), summary)


def _wide_node_float64(node_id: str, tensor: torch.Tensor, values: torch.Tensor, grad: torch.Tensor | None,
                       positions: torch.Tensor, axis: int) -> WideNode:
    """The float64 path, for a node with a non-finite value or gradient (or a square past float32's range):
    the finite values only; the sums accumulate in float64."""
    finite = torch.isfinite(values)
    flat = values[finite]
    values = torch.where(finite, values, torch.zeros_like(values))
    some = flat.numel() > 0
    grad_norm = None if grad is None else torch.linalg.vector_norm(grad, dim=-1, dtype=WIDE)
    mean_abs = values.abs()[positions].mean(dim=0, dtype=WIDE)
    top = torch.topk(mean_abs, min(TOP_DIMS, mean_abs.numel()))
    summary = TensorSummary(
        tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."), float(flat.min()) if some else 0.0,
        float(flat.max()) if some else 0.0, float(flat.mean(dtype=WIDE)) if some else 0.0,
        float(torch.linalg.vector_norm(flat, dtype=WIDE)),
        None if grad is None else float(torch.linalg.vector_norm(grad, dtype=WIDE)),
        None if grad is None else float(grad.abs().max()), None if grad is not None else no_grad_reason(node_id))
    return WideNode(node_id, tuple(tensor.shape), axis, _rows(torch.linalg.vector_norm(values, dim=-1, dtype=WIDE)),
                    None if grad_norm is None else _rows(grad_norm),
                    tuple((int(i), float(v)) for i, v in zip(top.indices, top.values, strict=True)), summary)


def _renamed(node: WideNode, node_id: str) -> WideNode:
    """The same tensor's summary under another node id (a group's output is its last member's tensor)."""
    reason = None if node.summary.no_grad_reason is None else no_grad_reason(node_id)
    return dataclasses.replace(node, node_id=node_id, summary=dataclasses.replace(node.summary, no_grad_reason=reason))


class NodeSummaries:
    """The head and wide nodes of one recording, in the order the recording first made them.

    Use: `take` as record_model's keep_value; `watch(recording.values)` before the backward; `finish` after."""

    def __init__(self, positions: torch.Tensor, keep: frozenset[str] = frozenset()):
        self.positions = positions  # (G, L) bool: the scored positions that are real
        self.keep = keep  # node ids whose tensor the caller reads after the backward
        self.order: dict[str, None] = {}
        self.head: dict[str, HeadNode] = {}
        self.wide: dict[str, WideNode | None] = {}
        self._last: tuple[torch.Tensor, WideNode | None] | None = None
        self.twins: dict[str, str] = {}  # node id -> the node id whose summary it takes (`twin`)
        self.outputs: dict[str, torch.Tensor] = {}  # a copy's own output (G, T), by copy name

    def twin(self, source: str, target: str) -> None:
        """Give copy `target` every node copy `source` has made so far, renamed (`source.blocks.3.mlp` ->
        `target.blocks.3.mlp`, `softmax@source.…#0` -> `softmax@target.…#0`), in the same order: for a copy
        that computes exactly what `source` did (the same tensors read by the same ops on the same input),
        so its forward need not run. Resolved in `finish`."""
        for node_id in [k for k in self.order if copy_of(k) == source]:
            renamed = renamed_id(node_id, source, target)
            self.twins[renamed] = node_id
            self.order[renamed] = None

    def take(self, node_id: str, tensor: torch.Tensor) -> bool:
        """Keep a node that has (or may get) a gradient, or is the head; summarise any other now."""
        self.order[node_id] = None
        if node_id in COPIES:
            self.outputs[node_id] = tensor
        if is_head(node_id) or tensor.requires_grad or node_id in self.keep:
            self.wide.pop(node_id, None)
            return True
        last = self._last
        if last is not None and last[0] is tensor:
            node = None if last[1] is None else _renamed(last[1], node_id)
        else:
            node = wide_node(node_id, tensor, self.positions, None)
        self._last = (tensor, node)
        self.wide[node_id] = node
        return False

    def watch(self, values: dict[str, torch.Tensor]) -> None:
        """One hook per kept wide tensor: summarise it with its gradient as the backward makes that, then drop it."""
        self._last = None
        shared: dict[int, list[str]] = {}
        tensors: dict[int, torch.Tensor] = {}
        for node_id, tensor in values.items():
            if not is_head(node_id) and tensor.requires_grad:
                shared.setdefault(id(tensor), []).append(node_id)
                tensors[id(tensor)] = tensor
        for key, ids in shared.items():
            tensors[key].register_hook(functools.partial(self._on_grad, values, tuple(ids)))

    def _on_grad(self, values: dict[str, torch.Tensor], ids: tuple[str, ...], grad: torch.Tensor) -> None:
        tensor = values[ids[0]]
        node = wide_node(ids[0], tensor, self.positions, grad)
        for node_id in ids:
            self.wide[node_id] = None if node is None else _renamed(node, node_id)
            if node_id not in self.keep:
                del values[node_id]

    def finish(self, values: dict[str, torch.Tensor]) -> tuple[dict[str, HeadNode], dict[str, WideNode]]:
        """The head, and the wide nodes no gradient reached; both dicts in the recording's order."""
        for node_id, tensor in values.items():
            if is_head(node_id):
                self.head[node_id] = head_node(node_id, tensor)
            elif node_id not in self.wide:
                self.wide[node_id] = wide_node(node_id, tensor, self.positions, grad_of(tensor))
        for node_id, source in self.twins.items():
            if source in self.head:
                twin = self.head[source]
                reason = None if twin.no_grad_reason is None else no_grad_reason(node_id)
                self.head[node_id] = dataclasses.replace(twin, node_id=node_id, no_grad_reason=reason)
            elif (summary := self.wide.get(source)) is not None:
                self.wide[node_id] = _renamed(summary, node_id)
        head = {k: self.head[k] for k in self.order if k in self.head}
        wide = {k: node for k in self.order if (node := self.wide.get(k)) is not None}
        return head, wide


def attention_of(weights: torch.Tensor, mask: torch.Tensor, prompt_length: int) -> tuple[list, ...]:
    """Per completion, (H, n, n) over the n positions the policy scored: the prompt and its real tokens but
    the last (log π of token t is read at position t − 1)."""
    lengths = [prompt_length + int(m.sum()) - 1 for m in mask]
    return tuple(weights[i, :, :n, :n].detach().cpu().tolist() for i, n in enumerate(lengths))
