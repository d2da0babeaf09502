"""Tracing an nn.Module's forward pass into nodes and data flows, by tensor identity.

Why hooks and a TorchFunctionMode, not torch.fx or torch.export: a model may index with a
tensor (`logprobs[0, actions]`), branches on its conventions and returns a dict holding
dataclasses, which symbolic tracing trips on; a real forward pass with example inputs
runs whatever Python the model is written in. What is seen:

- every named submodule call (forward pre-hooks and hooks): which tensors went in, and
  which came out, so a module's outputs are tagged with the node that made them;
- every torch call in between (`torch.overrides.TorchFunctionMode`): a result's tags are
  the union of its inputs' tags, so `x.detach()`, `a * 0.04` or `-loss` pass data through
  without becoming nodes.

Nodes, and how they are named (as in the user's own export, the seed walkthrough):
- a submodule from `torch.nn` without children (Linear, LogSoftmax) is a `layer` named by
  its path (`policy.logits`); a module with children, or one of the model's own classes,
  is a `module` group (`policy`, `advantages`). A childless group does its computation
  itself: every torch call inside it belongs to it.
- a function of the `torch` or `torch.nn.functional` namespace called in a group's own
  forward (not inside a child) is a `layer` named `<function>@<scope>#<k>`: `sub@Model#0`
  is the first `torch.sub` in the root's forward (the root is named by its class).
  Methods and operators (`a - b`, `a.mean()`) carry data but are not nodes.
- a `statement` module (named by the caller) shows its computation as one member, a
  `Python` statement `python@<path>#0`, which receives its inputs and makes its output.
  Which modules do is a display choice no trace can recover: the seed gives one to
  `ratio` and `clipped`, none to `advantages` and `divergence`, which compute as much.
- an index carries no values (`logprobs[0, actions]` reads `logprobs`), and a tensor made
  from another's shape only (`torch.ones_like`) carries none of its data.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

INPUT_ID, OUTPUT_ID = "input", "output"
INDEXING = {"__getitem__", "index_select", "gather", "take", "take_along_dim"}  # only the first argument is data
SHAPE_ONLY = {"zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "eye", "linspace"}


@dataclass
class TracedNode:
    node_id: str
    kind: str  # input | output | module | layer (the format's node kinds)
    op: str  # Input, Output, Module, Python, a torch.nn class name, or torch.<function>
    parent: str | None = None
    module: nn.Module | None = None  # the submodule, for its class and parameters
    shape: tuple[int, ...] | None = None  # the first input's, for the Input node


@dataclass
class Trace:
    model_name: str
    nodes: dict[str, TracedNode] = field(default_factory=dict)  # in the order they were first seen
    flows: list[tuple[str, str]] = field(default_factory=list)  # (source, target) leaf nodes, as observed


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in nested tuples, lists, dicts and dataclass-like objects, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from tensors_in(getattr(value, name))


def _public_function(func: Callable[..., Any]) -> str | None:
    """`torch.sub` -> "sub", `F.softmax` -> "nn.functional.softmax"; None for methods and operators."""
    name = getattr(func, "__name__", "")
    if name and getattr(torch, name, None) is func:
        return name
    if name and getattr(torch.nn.functional, name, None) is func:
        return f"nn.functional.{name}"
    return None


class _Recorder(TorchFunctionMode):
    def __init__(self, model: nn.Module, statement_modules: frozenset[str], keep_values: bool = False,
                 keep_value: Callable[[str, torch.Tensor], bool] | None = None) -> None:
        super().__init__()
        # node id -> the tensor it made (its last call), when recording values for the engine
        self.values: dict[str, torch.Tensor] | None = {} if keep_values else None
        self.keep_value = keep_value
        self.trace = Trace(model_name=type(model).__name__)
        self.tags: dict[int, tuple[str, ...]] = {}  # id(tensor) -> nodes its data comes from, while it lives
        # a tag is dropped when its tensor dies (before its id can be reused), so the pass holds no tensor
        # the model itself lets go of: a frozen copy's intermediates are freed as it runs
        self.finalizers: list[weakref.finalize] = []
        self.stack: list[str] = []  # running submodules, innermost last
        self.paths = {m: p for p, m in model.named_modules() if p}
        self.childless = {p for m, p in self.paths.items() if next(m.children(), None) is None}
        self.seen_flows: set[tuple[str, str]] = set()
        self.statement_modules = statement_modules
        self.calls: dict[tuple[str, str], int] = {}
        self.root_name = self.trace.model_name

    # -- tags ---------------------------------------------------------------------
    def tag(self, value: Any, sources: tuple[str, ...]) -> None:
        for t in tensors_in(value):
            if id(t) not in self.tags:
                self.finalizers.append(weakref.finalize(t, self.tags.pop, id(t), None))
            self.tags[id(t)] = sources

    def sources(self, value: Any) -> tuple[str, ...]:
        found: dict[str, None] = {}  # ordered set: argument order decides edge order
        for t in tensors_in(value):
            found.update(dict.fromkeys(self.tags.get(id(t), ())))
        return tuple(found)

    def flow(self, sources: tuple[str, ...], target: str) -> None:
        for source in sources:
            if (source, target) not in self.seen_flows:
                self.seen_flows.add((source, target))
                self.trace.flows.append((source, target))

    # -- scope --------------------------------------------------------------------
    def absorbs(self, path: str) -> bool:
        """A childless submodule computes inside itself: its inner calls are not nodes."""
        return path in self.childless

    def inside_leaf(self) -> bool:
        return bool(self.stack) and self.absorbs(self.stack[-1])

    def keep(self, node_id: str, value: Any) -> None:
        if self.values is not None and (t := next(tensors_in(value), None)) is not None:
            if self.keep_value is None or self.keep_value(node_id, t):
                self.values[node_id] = t
            else:  # the caller took what it needs of this value now
                self.values.pop(node_id, None)

    def add(self, node: TracedNode) -> None:
        self.trace.nodes.setdefault(node.node_id, node)

    # -- module hooks -------------------------------------------------------------
    def before(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        path = self.paths[module]
        if self.inside_leaf():  # a module called inside a leaf belongs to that leaf
            self.stack.append(self.stack[-1])
            return
        is_layer = self.absorbs(path) and type(module).__module__.startswith("torch.nn.")
        self.add(TracedNode(path, "layer" if is_layer else "module", type(module).__name__ if is_layer else "Module",
                            module=module))  # its parent is set from its path once the run is over
        if self.absorbs(path):
            target = path
            if path in self.statement_modules:
                target = f"python@{path}#0"
                self.add(TracedNode(target, "layer", "Python", parent=path))
            self.flow(self.sources((args, kwargs)), target)
        self.stack.append(path)

    def after(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        path = self.stack.pop()
        if path != self.paths[module]:
            return  # inside a leaf
        self.keep(path, output)  # a group's value is its forward's output
        if not self.absorbs(path):
            return  # a group: its outputs already carry their makers' tags
        if path in self.statement_modules:
            self.keep(f"python@{path}#0", output)
        self.tag(output, (f"python@{path}#0" if path in self.statement_modules else path,))

    # -- torch calls --------------------------------------------------------------
    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if self.inside_leaf():
            return result
        name = getattr(func, "__name__", "")
        public = _public_function(func)
        if name.endswith("_like") or (public in SHAPE_ONLY):
            return result
        sources = self.sources(args[:1] if name in INDEXING else (args, kwargs))
        if not sources:
            return result
        if public is None:
            self.tag(result, sources)
            return result
        scope = self.stack[-1] if self.stack else self.root_name
        short = public.rsplit(".", 1)[-1]
        k = self.calls.get((short, scope), 0)
        self.calls[(short, scope)] = k + 1
        node_id = f"{short}@{scope}#{k}"
        self.add(TracedNode(node_id, "layer", f"torch.{public}", parent=self.stack[-1] if self.stack else None))
        self.flow(sources, node_id)
        self.tag(result, (node_id,))
        self.keep(node_id, result)
        return result


@dataclass
class Recording:
    """One forward pass with every node's value: the engine's view of the exported graph."""
    trace: Trace
    result: Any  # what forward returned
    values: dict[str, torch.Tensor]  # node id -> its output; gradients retained where they flow


def trace_model(model: nn.Module, inputs: tuple[Any, ...], *,
                select_output: Callable[[Any], Any] = lambda out: out,
                statement_modules: frozenset[str] = frozenset()) -> Trace:
    """Run ``model(*inputs)`` once, recording its graph. ``select_output`` picks what of
    the result is the model's output (a model may return a dict: its loss)."""
    with torch.no_grad():
        return _run(model, inputs, select_output, statement_modules, keep_values=False).trace


def record_model(model: nn.Module, inputs: tuple[Any, ...], *,
                 select_output: Callable[[Any], Any] = lambda out: out,
                 statement_modules: frozenset[str] = frozenset(),
                 keep_value: Callable[[str, torch.Tensor], bool] | None = None) -> Recording:
    """The same pass with autograd on, keeping each node's output under the node id the
    exporter gives it: after ``backward()`` each kept tensor's ``.grad`` is d(loss)/d(node).
    The ids cannot drift from the exported file's, since one tracer names both.
    ``keep_value(node_id, tensor)``, when given, sees each node's value as it is made; where it
    returns False the value is left out of ``values`` (the caller took what it needs of it then,
    so a large model's nodes need not all be held at once)."""
    recording = _run(model, inputs, select_output, statement_modules, keep_values=True, keep_value=keep_value)
    for t in recording.values.values():
        if t.requires_grad:
            t.retain_grad()
    return recording


def _run(model: nn.Module, inputs: tuple[Any, ...], select_output: Callable[[Any], Any],
         statement_modules: frozenset[str], keep_values: bool,
         keep_value: Callable[[str, torch.Tensor], bool] | None = None) -> Recording:
    unknown = statement_modules - {p for p, _ in model.named_modules() if p}
    if unknown:
        raise ValueError(f"statement modules {sorted(unknown)} are not submodules of {type(model).__name__}")
    recorder = _Recorder(model, statement_modules, keep_values, keep_value)
    first = next(tensors_in(inputs), None)
    recorder.add(TracedNode(INPUT_ID, "input", "Input", shape=tuple(first.shape) if first is not None else None))
    recorder.tag(inputs, (INPUT_ID,))
    handles = []
    for module in recorder.paths:
        handles.append(module.register_forward_pre_hook(recorder.before, with_kwargs=True))
        handles.append(module.register_forward_hook(recorder.after, with_kwargs=True))
    try:
        with recorder:
            result = model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    # A submodule belongs to the group it is declared in (`block.mlp` in `block`), even when
    # some other forward called it; functions and statements stay in the scope that ran them.
    for node in recorder.trace.nodes.values():
        if node.module is not None:
            up = node.node_id.rsplit(".", 1)[0] if "." in node.node_id else None
            while up is not None and up not in recorder.trace.nodes:
                up = up.rsplit(".", 1)[0] if "." in up else None
            node.parent = up
    sources = recorder.sources(select_output(result))
    if not sources:
        raise ValueError("the selected output carries no data from the inputs: nothing to export")
    recorder.add(TracedNode(OUTPUT_ID, "output", "Output"))
    recorder.flow(sources, OUTPUT_ID)
    recorder.keep(INPUT_ID, inputs)
    recorder.keep(OUTPUT_ID, select_output(result))
    for finalizer in recorder.finalizers:  # the tags are done with: the tensors that live on owe them nothing
        finalizer.detach()
    return Recording(recorder.trace, result, recorder.values or {})
