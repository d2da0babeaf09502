"""What a node means: a name a person can read, its formula, and one plain sentence.

Derived from the snapshot's own data: a module's `moduleTemplateId` (and instance id),
a layer's op and params, and for a member its parent's template. A kind describes its own
model's templates (Kind.describe, bound by the app drawing the page: described_by below); every other
graph still gets a name from its ops and ids ("Linear 3→4", "Block"), never an error.
The formulas follow docs/design.md §3 symbol for symbol.

`filled_formula` writes a formula again with one sample's numbers, every one read from
the engine's record: this module computes nothing, it only spells numbers
(app/views/numbers.py) and returns None where a number was not recorded.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.views.numbers import MINUS


@dataclass(frozen=True)
class NodeMeaning:
    display_name: str  # e.g. "Policy ratio ρ"
    formula: str | None  # None where the model defines none
    summary: str  # one plain sentence
    note: str | None = None  # one more sentence where the conventions need it (the loss's aggregation)


CALL_ID = re.compile(r"^(?P<op>[^@#]+)@(?P<owner>[^@#]+)#(?P<k>\d+)$")


def _humanise(text: str) -> str:
    """`old_policy` -> "Old policy", `sub@Block#2` -> "sub #2 in Block", `MyBlock` -> "My block"."""
    call = CALL_ID.match(text)
    if call:
        return f"{call['op']} #{call['k']} in {call['owner']}"
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text).replace("_", " ").replace(".", " ").split()
    if not words:
        return f"“{text}”" if text.strip() else "unnamed node"
    words = [words[0]] + [w.lower() if w[:1].isupper() and w[1:].islower() else w for w in words[1:]]
    return " ".join(words)[:1].upper() + " ".join(words)[1:]


def _int_param(node: Node, name: str) -> int | None:
    value = node.params.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _generic(node: Node) -> NodeMeaning:
    """A graph this module has no table for: name and sentence from the op and the id."""
    described = node.metadata.layer_type.description if node.metadata.layer_type else None
    if node.op == "Linear":
        n_in, n_out = _int_param(node, "in_features"), _int_param(node, "out_features")
        sizes = f" {n_in}→{n_out}" if n_in is not None and n_out is not None else ""
        bias = node.params.get("bias", True) is not False
        what = (f"each of its {n_out} outputs is a weighted sum of its {n_in} inputs" if sizes
                else "each output is a weighted sum of the inputs")
        return NodeMeaning(f"Linear{sizes}", "y = W x + b" if bias else "y = W x",
                           f"A fully connected layer: {what}{' plus a bias' if bias else ''}.")
    if node.op == "LogSoftmax":
        return NodeMeaning("Log-softmax", f"y_c = x_c {MINUS} log Σ_k exp(x_k)",
                           "Turns scores into log-probabilities: exponentiated, they sum to 1.")
    if node.op == "Python":
        return NodeMeaning(f"Python statement ({_humanise(node.node_id)})", None,
                           "A source statement with no graph equivalent; the file keeps no source for it, "
                           "and its shape is unknown until the model is traced.")
    if node.op in ("Input", "Output"):
        role = ("Where data enters the model: the layers after it read from it." if node.op == "Input"
                else "What the model returns: the last value its forward pass computes.")
        return NodeMeaning(f"{_humanise(node.node_id)} ({node.op.lower()})", None, role)
    if node.is_module:
        cls = (node.metadata.module_template_id or "").rsplit(":", 1)[-1]
        name = _humanise(cls) if cls.strip() else _humanise(node.node_id)
        count = len(node.members)
        return NodeMeaning(name, None, f"A module of {count} layer{'s' if count != 1 else ''}, "
                                       "drawn as one box until it is opened.")
    return NodeMeaning(_humanise(node.node_id) if "@" in node.node_id else f"{node.op} ({_humanise(node.node_id)})",
                       None, f"{described.rstrip('.')}." if described else f"A {node.op} operation.")


# A kind's words for the nodes of its own graphs: (snapshot, node, conventions, G) -> meaning, or
# None to pass. Each app binds its kinds' (AppContext.bound); the first answer wins (datasette's firstresult
# hooks), so a graph shaped like a kind's model reads in its words even when it is uploaded view-only.
Describer = Callable[[Snapshot, Node, Conventions | None, int | None], "NodeMeaning | None"]
# Bound for the call by the app whose page is drawn (app/web/context.py AppContext.bound: a request,
# a compute job), so two apps of one process never share them; none bound, a graph reads generically.
_DESCRIBERS: ContextVar[tuple[Describer, ...]] = ContextVar("describers", default=())


@contextlib.contextmanager
def described_by(describers: Sequence[Describer]) -> Iterator[None]:
    """Run the body with these words for nodes (an app's kinds', in its registry order)."""
    token = _DESCRIBERS.set(tuple(describers))
    try:
        yield
    finally:
        _DESCRIBERS.reset(token)


def node_meaning(snapshot: Snapshot, node_id: str, conventions: Conventions | None = None,
                 group_size: int | None = None) -> NodeMeaning:
    """The node's name, formula and sentence: a kind's words where one knows the graph (formulas
    following `conventions`, the paper's when None), else names from its ops and ids."""
    node = snapshot.node_map.get(node_id)
    if node is None:
        return NodeMeaning(_humanise(node_id), None, "A node this graph does not describe.")
    for describe in _DESCRIBERS.get():
        if (meaning := describe(snapshot, node, conventions, group_size)) is not None:
            return meaning
    return _generic(node)
