"""Which exports the real-model engine runs: those with exactly SmolLMGRPO's nodes and ops.

The rule is a fingerprint (sha256 over the sorted (node id, op) pairs) of the export target's trace.
Tracing SmolLMGRPO (three 135M-parameter Llamas, 1,825 nodes) takes 6-25 s, and every process that
loads the catalog asks the rule of every file, so the fingerprint is kept here and a quick test
(tests/kinds/smollm/test_node_map.py) traces the module and checks it: the rule cannot drift from
the exporter or the recorder without a red test.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache

from app.domain.snapshot import Snapshot

KIND_ID = "smollm"  # what a catalog entry this engine runs carries (app/domain/catalog.py)
LAST_BLOCK_NODE = "policy.blocks.29.mlp.down"
# fingerprint(expected_ops()) of engine/export_target.py's SmolLMGRPO; re-run the test to renew it
FINGERPRINT = "f4d98cf8eba99a292cd338c99975e8ee9e547044588dcce2b9c6c9dd1e4310c8"


def fingerprint(ops: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(ops.items())).encode()).hexdigest()


@lru_cache(maxsize=1)
def expected_ops() -> dict[str, str]:
    """The trace's (node id -> op): what the fingerprint is of (the test's side of the rule)."""
    from app.engine.runtime.trace import trace_model
    from app.kinds.smollm.engine.export_target import TARGETS

    target = TARGETS[0]
    model, args = target.build()
    trace = trace_model(model, args, select_output=target.select_output, statement_modules=target.statement_modules)
    return {n.node_id: n.op for n in trace.nodes.values()}


def is_smollm_runnable(snapshot: Snapshot) -> bool:
    if LAST_BLOCK_NODE not in snapshot.node_ids:
        return False
    return fingerprint({n: snapshot.node(n).op for n in snapshot.node_ids}) == FINGERPRINT
