"""Step records for tests, built in float64 from a seed: ragged completions, old and reference
log-probs that differ from the policy's (so ratios clip and KL is not 0), rewards by two functions."""
from __future__ import annotations

from typing import Any

import numpy as np

from app.kinds.step_record.domain.arrays import pack


def make_record(seed: int = 0, groups: int = 2, size: int = 4, lengths: tuple[int, int] = (3, 12),
                packed: bool = False, beta: float = 0.04, drift: float = 0.3, **config: Any) -> dict:
    rng = np.random.default_rng(seed)

    def arr(x: np.ndarray) -> Any:
        return pack(x, "float64") if packed else [float(v) for v in x]

    out_groups = []
    for g in range(groups):
        completions = []
        rewards = rng.integers(0, 2, size).astype(float)
        if g == groups - 1 and groups > 1:
            rewards[:] = 1.0  # the last group has no reward variance
        adv = (rewards - rewards.mean()) / (rewards.std(ddof=1) + 1e-4) if size > 1 else rewards * 0
        for i in range(size):
            n = int(rng.integers(lengths[0], lengths[1] + 1))
            logp = -rng.exponential(1.0, n)
            # log-probs stay ≤ 0 (the format refuses a probability above 1)
            old = np.minimum(logp + rng.normal(0, drift, n), -1e-4) if drift else logp.copy()
            ref = np.minimum(logp + rng.normal(0, drift, n), -1e-4) if drift else logp.copy()
            completions.append({
                "token_ids": [int(t) for t in rng.integers(0, 500, n)],
                "tokens": [rng.choice([" the", "\n", "7", " +", "\t", "ans", " "]) for _ in range(n)],
                "rewards": {"accuracy": float(rewards[i]), "format": 0.0},
                "advantage": float(adv[i]), "logprobs": arr(logp), "old_logprobs": arr(old),
                "ref_logprobs": arr(ref), "sampling_logprobs": arr(np.minimum(old + rng.normal(0, 0.05, n), -1e-4)),
                "entropy": arr(rng.uniform(0, 3, n)), "truncated": bool(n == lengths[1]),
            })
        out_groups.append({"prompt": f"What is {g} + {g}?\n", "completions": completions})
    return {"format": "grpo.step-record", "version": 1,
            "run": {"framework": "test", "framework_version": "0", "model": "test/tiny-model", "step": 7},
            "config": {"beta": beta, "max_length": lengths[1], **config},
            "reward_functions": ["accuracy", "format"], "groups": out_groups, "metrics": {}}
