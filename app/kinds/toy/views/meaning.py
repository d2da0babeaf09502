"""What ToyGRPO's nodes mean: the one table of its module templates (app/kinds/toy/engine/model.py)
and its own nodes, formulas following the conventions in force, and `filled_formula`, which
writes a formula again with one sample's recorded numbers (it computes nothing, it only spells
numbers, and returns None where a number was not recorded). Formulas follow docs/design.md §3.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.kinds.toy.domain.toy_task import ROLE_LABELS, ToyPrompt
from app.kinds.toy.engine.records import StepResult
from app.views import convention_text as ct
from app.views.meaning import CALL_ID, NodeMeaning
from app.views.numbers import MINUS


@dataclass(frozen=True)
class Known:
    name: str
    formula: str | None
    summary: str
    symbol: str = ""  # a policy's symbol (π_θ), used by its members' names
    statement: str = ""  # what the module's single Python statement is called
    filled: str | None = None  # which per-sample formula `filled_formula` writes
    convention: str | None = None  # which formula of convention_text.FORMULAS replaces `formula`


# The one table: ToyGRPO's module templates (an instance id refines a shared template),
# then ToyGRPO's own nodes outside any module, keyed by op.
TOY_GRPO: dict[str, Known] = {
    "model::CompletionPolicy": Known(
        "Completion policy π", "log π(·|q) = log softmax(W x + b)",
        "A policy over the four answers: it reads the prompt and gives each answer a log-probability.",
        symbol="π"),
    "model::CompletionPolicy/policy": Known(
        "Policy π_θ", "log π_θ(·|q) = log softmax(W x + b)",
        "The model being trained: it reads the prompt and gives each of the four answers a probability, "
        "shown as log-probabilities.", symbol="π_θ"),
    "model::CompletionPolicy/old_policy": Known(
        "Old policy π_old", "log π_old(·|q) = log softmax(W x + b)",
        "A frozen copy of the policy from the moment this group of answers was sampled; the ratio ρ "
        "measures how far the policy has moved since.", symbol="π_old"),
    "model::CompletionPolicy/reference_policy": Known(
        "Reference policy π_ref", "log π_ref(·|q) = log softmax(W x + b)",
        "A frozen copy of the model before any training; the divergence penalty keeps the policy from "
        "drifting far from it.", symbol="π_ref"),
    "model::GroupAdvantages": Known(
        "Group advantages A", f"A_i = (r_i {MINUS} mean(r)) / (std_pop(r) + ε_A)",
        "How much better each answer's reward is than its group's average, in units of the group's spread: "
        "positive means “do more of this”, negative “do less”.", convention="advantages"),
    # not filled: mean(r), std(r) unrecorded
    "model::PolicyRatio": Known(
        "Policy ratio ρ", f"ρ_i = exp(log π_θ(o_i|q) {MINUS} log π_old(o_i|q))",
        "How many times more likely the current policy makes each sampled answer than the old policy that "
        "sampled it; 1 means unchanged.", statement="ratio", filled="ratio", convention="ratio"),
    "model::ClippedSurrogate": Known(
        "Clipped surrogate L", f"L_i = min(ρ_i·A_i, clip(ρ_i, 1{MINUS}ε, 1+ε)·A_i)",
        f"Each answer's push, ratio times advantage, capped once the ratio leaves [1{MINUS}ε, 1+ε] in the "
        "direction the advantage pushes, so that one update cannot overshoot.",
        statement="clipped-surrogate", filled="clipped", convention="clipped"),
    "model::ReferencePenalty": Known(
        "Reference divergence D",
        f"D_i = exp(log π_ref {MINUS} log π_θ) {MINUS} (log π_ref {MINUS} log π_θ) {MINUS} 1",
        "A per-answer estimate of how far the policy has drifted from the reference policy: never negative, "
        "and 0 where the two agree.", filled="divergence", convention="divergence"),
    "Input": Known(
        "Prompt features x", None,
        "The prompt, written as a few numbers that all three policy copies read."),
    "torch.sub": Known(
        f"Per-sample objective L {MINUS} βD", f"L_i {MINUS} β·D_i",
        "Each answer's capped push minus β times its drift penalty; training raises the average of these.",
        filled="objective", convention="objective"),
    "Output": Known(
        "Loss", f"loss = {MINUS}J = {MINUS}(1/G) Σ_i (L_i {MINUS} β·D_i)",
        "The one number training lowers: minus the average of the per-sample objectives.",
        convention="output"),
}
TOY_TEMPLATES = frozenset(k for k in TOY_GRPO if k.startswith("model::"))
TOY_MODEL = "ToyGRPO"  # the owner in ids such as sub@ToyGRPO#0 (op@Owner#k)

def _template_entry(node: Node | None) -> Known | None:
    if node is None or not node.metadata.module_template_id:
        return None
    template = node.metadata.module_template_id
    instance = node.metadata.module_instance_id
    return TOY_GRPO.get(f"{template}/{instance}") or TOY_GRPO.get(template)


def _is_toy_graph(snapshot: Snapshot) -> bool:
    # Asked once per top-level Input/Output: a set lookup, not a walk over every node.
    return not snapshot.module_template_ids.isdisjoint(TOY_TEMPLATES)


def _known(snapshot: Snapshot, node: Node) -> tuple[Known | None, Known | None]:
    """(the node's own table entry, its parent module's entry)."""
    parent = snapshot.node_map.get(node.parent_id) if node.parent_id else None
    own = _template_entry(node)
    if own is None and node.parent_id is None and node.op in ("Input", "Output", "torch.sub"):
        call = CALL_ID.match(node.node_id)
        toy_call = call is not None and call["owner"] == TOY_MODEL
        if (node.op == "torch.sub" and toy_call) or (node.op != "torch.sub" and _is_toy_graph(snapshot)):
            own = TOY_GRPO[node.op]
    return own, _template_entry(parent)


def _member(node: Node, parent: Known, c: Conventions) -> NodeMeaning | None:
    """A layer inside one of ToyGRPO's modules, named after what the module makes of it."""
    if node.op == "Linear" and parent.symbol:
        return NodeMeaning(f"Logits of {parent.symbol}", "z = W x + b",
                           "One raw score per answer, a weighted sum of the prompt features plus a bias; "
                           "a higher score becomes a higher probability.")
    if node.op == "LogSoftmax" and parent.symbol:
        return NodeMeaning(f"Log-probabilities log {parent.symbol}",
                           f"log {parent.symbol}(c|q) = log softmax(z)_c = z_c {MINUS} log Σ_k exp(z_k)",
                           "The scores turned into log-probabilities of the four answers: exponentiated, "
                           "they sum to 1.")
    if node.op == "Python" and parent.statement:
        module = parent.name[:1].lower() + parent.name[1:]
        return NodeMeaning(f"The {parent.statement} expression", _formula(parent, c),
                           f"The one statement of the {module} module; the file keeps no source for it, "
                           "so it shows the module's output.")
    return None


def _formula(entry: Known, c: Conventions) -> str | None:
    return ct.FORMULAS[entry.convention](c) if entry.convention else entry.formula


_PAPER = Conventions()


def describe_toy(snapshot: Snapshot, node: Node, conventions: Conventions | None = None,
                 group_size: int | None = None) -> NodeMeaning | None:
    """The node's name, formula and sentence where ToyGRPO's table knows it (else None); formulas
    follow `conventions` (the paper's when None), and with `group_size` the loss says how its
    aggregation weighs."""
    c = conventions or _PAPER
    own, parent = _known(snapshot, node)
    if own is not None:
        summary = ct.summary(own.convention, c) if own.convention else None
        note = ct.aggregation_note(c, group_size) if own.convention == "output" and group_size else None
        return NodeMeaning(own.name, _formula(own, c), summary or own.summary, note)
    if parent is not None:
        return _member(node, parent, c)
    return None


def choice_label(prompt: ToyPrompt, choice: int) -> str:
    """ "2 · readable correct": the choice and what it stands for in this prompt."""
    return f"{choice} · {ROLE_LABELS[prompt.role(choice)]}"


# ---------------------------------------------------------------- filled formulas

# Where a sample's number lives when the sample dict lacks it: a (G,) node, or the
# log-probability row of a policy, indexed by the sample's action.
_NODE_OF = {"advantage": "advantages", "ratio": "ratio", "clipped": "clipped", "divergence": "divergence",
            "objective": "sub@ToyGRPO#0"}
_ROW_OF = {"logp": "policy.log_probabilities", "logp_old": "old_policy.log_probabilities",
           "logp_ref": "reference_policy.log_probabilities"}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _recorded(result: StepResult, i: int, key: str) -> float | None:
    """Sample i's `key` as the engine recorded it, or None."""
    sample = result.samples[i]
    if key in sample:
        return _number(sample[key])
    record = result.nodes.get(_NODE_OF.get(key, ""))
    if record is not None and isinstance(record.values, list) and i < len(record.values):
        return _number(record.values[i])
    record = result.nodes.get(_ROW_OF.get(key, ""))
    action = sample.get("action")
    if record is not None and isinstance(record.values, list) and record.values and isinstance(action, int):
        row = record.values[0]
        return _number(row[action]) if isinstance(row, list) and 0 <= action < len(row) else None
    return None


def filled_formula(snapshot: Snapshot, node_id: str, result: StepResult, i: int) -> str | None:
    """The node's formula with sample i's recorded numbers, e.g. "ρ₃ = exp(−1.204 − (−1.386)) = 1.200",
    under the run's conventions (app/views/convention_text.py writes it).

    None when the node has no per-sample formula, takes no part in the shown step, or a
    number it needs was not recorded."""
    node = snapshot.node_map.get(node_id)
    if node is None or result.kind != "grpo" or not 0 <= i < len(result.samples):
        return None
    own, parent = _known(snapshot, node)
    entry = own if own is not None else (parent if parent is not None and node.op == "Python" else None)
    record = result.nodes.get(node_id)
    if entry is None or entry.filled is None or (record is not None and record.inactive_reason):
        return None
    c = result.conventions
    values = {key: _recorded(result, i, key) for key in ct.needs(entry.filled, c)}
    present = {key: value for key, value in values.items() if value is not None}
    if len(present) != len(values):
        return None
    flags = {k: v for k, v in result.samples[i].items() if isinstance(v, bool)}
    return ct.filled_line(entry.filled, i, present, flags, c)
