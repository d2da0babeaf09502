"""Which exports the real-model engine runs: those of the GRPO objective around the shared decoder
(app/engine/lm/decoder.py), of any depth, with exactly its nodes and ops.

The rule is a fingerprint (sha256 over the sorted (node id, op) pairs) of the graph with every block's
number written `*`: a model of 30 blocks and one of 2 give the same pattern when each block holds the
same nodes, and the blocks must run 0..n-1 in all three copies. Two patterns exist: Llama's and Qwen2's
(biases are no nodes), and Qwen3's (a q and a k RMSNorm per block). Tracing is slow on a real model
(6-25 s on SmolLM2's 1,825 nodes) and every process that loads the catalog asks the rule of every file,
so the fingerprints are kept here and a quick test (tests/kinds/smollm/test_node_map.py) traces tiny
configurations of both and checks them: the rule cannot drift from the exporter without a red test.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from app.domain.snapshot import Snapshot

# fingerprint(block_pattern(trace)) of engine/export_target.py's objective, without and with q/k norms;
# re-run the test to renew them
FINGERPRINTS = {
    "llama": "3502bd79ca0ab788b9c901c2eb00ec10f89136d4d4a0d6ddd346a66cc53d7ef4",
    "qk_norm": "05881cc22b70ccf8f48e2188d5e30e936658875262b1c0d095a3d931b2504cee",
}
BLOCK_NUMBER = re.compile(r"(?<=\.blocks\.)\d+")
CONFLICT = "(blocks disagree)"


def fingerprint(ops: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(ops.items())).encode()).hexdigest()


def block_pattern(ops: Mapping[str, str]) -> dict[str, str]:
    """(node id with its block number as `*` -> op): what one block of any depth looks like. Blocks that
    disagree on a node's op give it the op CONFLICT, which no fingerprint holds."""
    pattern: dict[str, str] = {}
    for node_id, op in ops.items():
        key = BLOCK_NUMBER.sub("*", node_id)
        pattern[key] = op if pattern.get(key, op) == op else CONFLICT
    return pattern


def expand(pattern: Mapping[str, str], n_blocks: int) -> set[str]:
    """The node ids a graph of `n_blocks` blocks with this pattern has: each `*` is every block."""
    return {key.replace(".blocks.*", f".blocks.{b}") for key in pattern for b in range(n_blocks)}


def block_count(node_ids: list[str] | tuple[str, ...] | set[str], copy: str = "policy") -> int:
    """How many blocks `copy` has in a graph (its `copy.blocks.N` groups)."""
    return len({int(m.group()) for n in node_ids if n.startswith(f"{copy}.blocks.")
                and (m := BLOCK_NUMBER.search(n)) is not None})


def traced_pattern(qk_norm: bool) -> dict[str, str]:
    """The pattern of a tiny configuration's trace (the test's side of the rule)."""
    from app.engine.lm.decoder import DecoderConfig
    from app.engine.runtime.trace import trace_model
    from app.kinds.smollm.engine.export_target import TARGETS, smollm_grpo_on

    cfg = DecoderConfig(vocab_size=64, n_layer=2, n_embd=32, n_head=4, n_kv_head=2, ffn_dim=48, rope_theta=10000.0,
                        rms_eps=1e-5, context_length=64, qk_norm=qk_norm)
    target = TARGETS[0]
    model, args = smollm_grpo_on(cfg)
    trace = trace_model(model, args, select_output=target.select_output, statement_modules=target.statement_modules)
    return block_pattern({n.node_id: n.op for n in trace.nodes.values()})


def is_smollm_runnable(snapshot: Snapshot) -> bool:
    ids = snapshot.node_ids
    if "policy.blocks.0.mlp.down" not in ids:
        return False
    pattern = block_pattern({n: snapshot.node(n).op for n in ids})
    # every block has every node of the pattern, numbered 0..n-1 in each copy: nothing missing, nothing more
    return fingerprint(pattern) in FINGERPRINTS.values() and expand(pattern, block_count(ids)) == set(ids)
