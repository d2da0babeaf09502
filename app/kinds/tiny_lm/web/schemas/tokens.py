"""The body of GET /api/walkthroughs/{id}/step: the tiny-LM walkthrough's token-level step.

Built from the engine's records as they are (dataclasses to dicts); documented by the route's
description rather than a model per field: the field names are the records' own (engine/token_records.py).
"""
from __future__ import annotations

from dataclasses import asdict

from app.kinds.tiny_lm.engine.token_records import TokenStepResult


def tokens_payload(walkthrough_id: str, result: TokenStepResult, step: str | None, node: str | None) -> dict:
    body: dict = {
        "walkthrough": walkthrough_id, "step": step, "device": result.device,
        "params": result.params.model_dump(),
        "prompt": {"text": result.prompt_text, "tokens": list(result.prompt_tokens),
                   "script": result.prompt_script, "answer": result.answer},
        "reward_parts": list(result.reward_parts),
        "objective": result.objective, "loss": result.loss, "policy_grad_norm": result.policy_grad_norm,
        "aggregations": [asdict(a) for a in result.aggregations],
        "completions": [{**{k: v for k, v in asdict(c).items() if k != "tokens"}, "length": c.length,
                         "tokens": [{**asdict(t), "delta_logp": t.delta_logp} for t in c.tokens]}
                        for c in result.completions],
    }
    if node is None:
        body["nodes"] = {nid: asdict(s) for nid, s in result.nodes.items()}
    else:
        record = result.node(node)
        body["nodes"] = {node: {"shape": list(record.shape or ()), "dtype": record.dtype, "values": record.values,
                                "grad": record.grad, "no_grad_reason": record.no_grad_reason}}
    return body
