"""Which exports the tiny-LM engine can run: those with exactly TinyLMGRPO's nodes and ops.

The expected ids and ops come from tracing the module itself (once, lazily), the same tracer
that names the recorded values, so the rule cannot drift from the exporter or the recorder.
"""
from __future__ import annotations

from functools import lru_cache

from app.domain.snapshot import Snapshot


@lru_cache(maxsize=1)
def expected_ops() -> dict[str, str]:
    import torch

    from app.engine.runtime.trace import trace_model
    from app.kinds.tiny_lm.domain.arith_task import encode
    from app.kinds.tiny_lm.engine.tiny_lm_grpo import STATEMENT_MODULES, TinyLMGRPO

    ids = torch.tensor([encode("1+1=2<end>")])
    mask = torch.ones(1, 2, dtype=torch.float64)
    trace = trace_model(TinyLMGRPO().double(), (ids, mask, torch.ones(1, dtype=torch.float64), 4),
                        select_output=lambda out: out["loss"], statement_modules=STATEMENT_MODULES)
    return {n.node_id: n.op for n in trace.nodes.values()}


def is_token_runnable(snapshot: Snapshot) -> bool:
    ops = expected_ops()
    return snapshot.node_ids == set(ops) and all(snapshot.node(n).op == op for n, op in ops.items())
