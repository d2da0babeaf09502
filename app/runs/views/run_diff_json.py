"""The run diff's JSON twin (`GET /api/runs/{id}/diff`): the same numbers as the page (views/run_diff.py), whole, with
"nan"/"inf" as strings (JSON has none), each histogram's edges and counts, and the top rows of each table."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict

from app.runs.domain.two_sample import Summary
from app.runs.engine.run_diff import MIN_TOKEN_COUNT, QUANTITIES, PromptChange, RunDiff, TokenChange
from app.runs.views.run_diff import TOP
from app.views.urls import URLS


def _number(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)  # JSON has no NaN: "nan", as GET /api/runs/{id} writes it


def _summary(s: Summary | None) -> dict | None:
    return None if s is None else {k: _number(float(v)) if k != "count" else v for k, v in asdict(s).items()}


def _prompt_json(r: PromptChange) -> dict:
    return {"prompt": r.prompt, "a": _number(r.a), "b": _number(r.b), "change": _number(r.change)}


def _token_json(t: TokenChange) -> dict:
    return {"id": t.token_id, "text": t.text, "count_a": t.count_a, "count_b": t.count_b,
            "mean_logprob_a": t.mean_a, "mean_logprob_b": t.mean_b, "change": t.change}


def diff_body(run_id: str, d: RunDiff, recorded: Mapping[int, str]) -> dict:
    quantities = {}
    for name, per in QUANTITIES:
        s = d.quantities[name]
        h = s.histogram
        quantities[name] = {
            "per": per, "a": _summary(s.a), "b": _summary(s.b),
            "mean_shift": s.mean_shift, "median_shift": s.median_shift, "ks": s.ks,
            "left_out": {"a": d.left_out[name][0], "b": d.left_out[name][1]},
            "histogram": None if h is None else {"edges": list(h.edges), "a": list(h.counts_a), "b": list(h.counts_b),
                                                 "below": h.below, "above": h.above}}
    p, t = d.prompts, d.tokens
    return {
        "id": run_id,
        "a": {"step": d.a, "walkthrough": recorded[d.a], "url": URLS.walkthrough(recorded[d.a])},
        "b": {"step": d.b, "walkthrough": recorded[d.b], "url": URLS.walkthrough(recorded[d.b])},
        "quantities": quantities,
        "prompts": {"matched": p.matched, "only_a": p.only_a, "only_b": p.only_b,
                    "reward": [_prompt_json(r) for r in p.reward], "length": [_prompt_json(r) for r in p.length],
                    "tied": [_prompt_json(r) for r in p.tied]},
        "tokens": {"min_count": MIN_TOKEN_COUNT, "compared": t.compared,
                   "rises": [_token_json(r) for r in t.rises[:TOP]], "falls": [_token_json(r) for r in t.falls[:TOP]]},
    }


__all__ = ["diff_body"]
