"""verl's rollout dumps for the tests (issue 34): `write_rollouts` writes them as verl 0.9.1's
RayPPOTrainer._write_generations does (json.dumps(entry, ensure_ascii=False, default=str), one line per response);
`expected` is every per-step number in float64 with numpy. numpy and json only: peers/test_verl_rollouts.py loads
this file by its path."""
from __future__ import annotations

import json

import numpy as np


def write_rollouts(root, step, inputs, outputs, scores, extra=None, folder="rollout_data_dir", gts=None):
    """verl's _write_generations, line for line."""
    (root / folder).mkdir(parents=True, exist_ok=True)
    n = len(inputs)
    base = {"input": inputs, "output": outputs, "gts": gts or [None] * n, "score": scores, "step": [step] * n}
    for k, v in (extra or {}).items():
        if len(v) == n:
            base[k] = v
    path = root / folder / f"{step}.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False, default=str) + "\n")
    return path


def batch(rng, prompts=4, n=4, tie=(0,)):
    """A rollout batch as verl dumps it: each prompt's n responses (interleaved after a shuffle)."""
    inputs, outputs, scores = [], [], []
    for p in range(prompts):
        for _ in range(n):
            inputs.append(f"Question {p}: what is {p} + {p}? Ответ:")
            outputs.append("x" * int(rng.integers(3, 40)))
            scores.append(1.0 if p in tie else float(rng.integers(0, 2)) + float(rng.normal(0, 0.01)))
    order = rng.permutation(len(inputs))
    return [inputs[i] for i in order], [outputs[i] for i in order], [scores[i] for i in order]


def expected(inputs, outputs, scores, extra=None):
    s = np.array(scores, dtype=np.float64)
    ok = ~np.isnan(s)
    groups = {}
    for i, q in enumerate(inputs):
        if ok[i]:
            groups.setdefault(q, []).append(s[i])
    multi = [g for g in groups.values() if len(g) > 1]
    tied = [g for g in multi if np.ptp(g) == 0]
    out = {"samples/count": len(s), "samples/unscorable_share": float((~ok).mean()),
           "samples/groups": len(set(inputs)), "samples/reward_mean": float(s[ok].mean()),
           "samples/reward_std": float(s[ok].std(ddof=1)),
           "samples/tied_group_share": len(tied) / len(multi),
           "samples/tied_sample_share": sum(map(len, tied)) / len(s),
           "samples/completion_chars_mean": float(np.mean([len(o) for o in outputs]))}
    for k, v in (extra or {}).items():
        out[f"samples/rewards/{k}/mean"] = float(np.mean(v))
    return out
