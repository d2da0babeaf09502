"""Which node of the user's export each ToyGRPO tensor is, and the one rule for "runnable".

A snapshot is runnable when it has exactly ToyGRPO's nodes with their ops; any
other export is shown view-only (docs/design.md §2).
"""
from __future__ import annotations

from app.domain.snapshot import Snapshot

# Snapshot node id -> where its tensor comes from. A `Python` node is its
# module's single statement, so it carries the module's output.
MODULE_NODES = (
    "policy", "policy.logits", "policy.log_probabilities",
    "old_policy", "old_policy.logits", "old_policy.log_probabilities",
    "reference_policy", "reference_policy.logits", "reference_policy.log_probabilities",
    "advantages", "ratio", "clipped", "divergence",
)
STATEMENT_NODES = {"python@ratio#0": "ratio", "python@clipped#0": "clipped"}
POLICY_NODES = ("input", "policy", "policy.logits", "policy.log_probabilities")
RUNNABLE_NODE_IDS = frozenset(MODULE_NODES) | set(STATEMENT_NODES) | {"input", "sub@ToyGRPO#0", "output"}
# What each node must be for this model to run it: same ids with other ops is another model.
RUNNABLE_NODE_OPS = {
    **{n: "Module" for n in ("policy", "old_policy", "reference_policy",
                             "advantages", "ratio", "clipped", "divergence")},
    **{f"{m}.logits": "Linear" for m in ("policy", "old_policy", "reference_policy")},
    **{f"{m}.log_probabilities": "LogSoftmax" for m in ("policy", "old_policy", "reference_policy")},
    **{n: "Python" for n in STATEMENT_NODES},
    "input": "Input", "sub@ToyGRPO#0": "torch.sub", "output": "Output",
}

NO_GRAD_REASON = {
    "old_policy": "frozen: the old policy only supplies pi_old",
    "reference_policy": "frozen: the reference only supplies pi_ref",
    "advantages": "rewards are constants: no gradient flows into the advantages",
}


def is_runnable(snapshot: Snapshot) -> bool:
    """The torch model matches a snapshot that has exactly its nodes, with their ops."""
    return snapshot.node_ids == RUNNABLE_NODE_IDS and all(
        snapshot.node(n).op == op for n, op in RUNNABLE_NODE_OPS.items())
