"""The record API's body: plain JSON of the engine's recomputation (no views, no HTML)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.cache import recomputed
from app.kinds.step_record.engine.checks import checks, unchecked
from app.kinds.step_record.engine.step import node_key


def _list(x: np.ndarray) -> list:
    """JSON has no ∞ or NaN: a value that overflowed (exp of a log-ratio of hundreds) is null."""
    if x.dtype.kind != "f" or np.isfinite(x).all():
        return x.tolist()
    return [v if math.isfinite(v) else None for v in x.tolist()]


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _nums(d: dict) -> dict:
    return {k: _num(v) if isinstance(v, float) else v for k, v in d.items()}


def record_payload(key: str, record: StepRecord, group: int, completion: int | None,
                   node: str | None) -> dict[str, Any]:
    r = recomputed(key, record)
    rows = [k for k, c in enumerate(r.completions) if c.group == group]
    if completion is not None:
        if completion >= len(rows):
            raise LookupError(f"group {group} has {len(rows)} completions: no completion {completion}")
        rows = [rows[completion]]
    body: dict[str, Any] = {
        "run": record.run.model_dump(), "config": record.config.model_dump(),
        "conventions": r.conventions.model_dump(), "loss": _num(r.loss), "grad_norm": _num(r.grad_norm),
        "metrics": _nums(r.metrics), "logged": dict(record.metrics),
        "checks": [{"key": c.key, "logged": c.logged, "recomputed": _num(c.recomputed), "diff": _num(c.diff),
                    "rel": _num(c.rel), "ok": c.ok, "why": c.why} for c in checks(record, r)],
        "unchecked": [{"key": u.key, "logged": u.logged, "reason": u.reason} for u in unchecked(record, r)],
        "group": group, "groups": len(record.groups),
    }
    if node is not None:
        if node_key(node) not in r.nodes:
            raise LookupError(f"node {node!r} holds no tensor")
        value, grad = r.nodes[node_key(node)]
        pick = (lambda x: _list(x[rows])) if value.ndim >= 1 else (lambda x: _num(float(x)))
        body["node"] = {"id": node, "shape": list(value.shape), "rows": rows, "value": pick(value),
                        "grad": None if grad is None else pick(grad)}
        return body
    group_record = record.groups[group]
    body["prompt"] = group_record.prompt
    body["completions"] = []
    for k in rows:
        c = r.completions[k]
        done = group_record.completions[c.index]
        body["completions"].append({
            "index": c.index, "length": done.length, "truncated": done.truncated, "rewards": done.rewards,
            "reward": _num(float(r.rewards[k])), "advantage": c.advantage,
            "advantage_from_rewards": _num(float(r.advantages_from_rewards[k])),
            "tokens": done.tokens, "token_ids": _list(done.token_ids), "mask": _list(c.mask),
            "logprobs": _list(c.logp), "ratio": _list(c.ratio), "clip_low": _list(c.clip_low),
            "clip_high": _list(c.clip_high), "kl": _list(c.kl), "weight": _list(c.weight),
            "per_token": _list(c.per_token), "is_weight": _list(c.is_weight), "grad": _list(c.grad),
            "grad_surrogate": _list(c.grad_surrogate), "grad_kl": _list(c.grad_kl),
        })
    return body
