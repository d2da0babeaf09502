"""Rewards of the tiny LM's rollouts for the training paths (the groups themselves are sampled by
lm_sampling.sample_groups, the one sampling loop)."""
from __future__ import annotations

from collections.abc import Sequence

from app.kinds.tiny_lm.domain.arith_task import Problem, RewardParts, rewards
from app.kinds.tiny_lm.engine.lm_sampling import Bucket


def bucket_rewards(bucket: Bucket, prompts: Sequence[Problem]) -> list[RewardParts]:
    """Reward parts of every row of the bucket, in row order."""
    texts = bucket.group.completions
    return [rewards(prompts[m], texts[j * bucket.group_size + k])
            for j, m in enumerate(bucket.members) for k in range(bucket.group_size)]
