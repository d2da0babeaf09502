"""Per-token files in the frameworks' own formats, field for field (issue 34), for the token-export tests.

- prime-rl: src/prime_rl/trainer/rl/token_export.py at 559b447 (TokenExporter.export, _export_columns,
  _compute_export_tensors): `token_exports/step_N/rank_R.jsonl`, one JSON object per sequence with
  schema_version 1, prompt and completion tokens packed, loss_mask False on the prompt, whose
  inference_logprobs are 0 (no sampling log-prob), non-finite floats as null, `STABLE` once flushed.
- slime: slime/observability/train_data_utils.py at 624b824 (_build_dump_payload): `train_data/{rollout_id}.pt`,
  torch.save of {"format_version": 2, "rollout_id", "rank", "samples": [...], "dp_shards": [...], "raw_reward"},
  each sample its response's tensors (rollout_log_probs, log_probs, ref_log_probs, advantages, returns,
  loss_masks as int, entropy) and its scalars (rollout_position, data_parallel_rank, response_lengths, truncated).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Seq:
    """One sequence as the tests see it: completion tokens only carry the numbers the stats are of."""
    prompt: int
    trainer: list[float]  # completion tokens' log π_trainer
    inference: list[float]  # completion tokens' log π_rollout
    advantage: float
    entropy: list[float]
    is_masked: list[bool] | None = None
    truncated: bool = False


def random_seq(rng: np.random.Generator, *, prompt: int = 5, n: int = 12, drift: float = 0.05,
               advantage: float | None = None, outliers: int = 0) -> Seq:
    inference = rng.uniform(-4.0, -0.05, n)
    trainer = inference + rng.normal(0.0, drift, n)
    for i in rng.choice(n, size=outliers, replace=False):
        trainer[i] = inference[i] + rng.choice([-1.5, 1.2])  # ratio e^-1.5 = 0.22, e^1.2 = 3.3: outside [0.5, 2]
    adv = float(rng.normal()) if advantage is None else advantage
    return Seq(prompt, [float(x) for x in trainer], [float(x) for x in inference], adv,
               [float(x) for x in rng.uniform(0.1, 3.0, n)])


def prime_rl_line(seq: Seq, step: int, rank: int = 0, index: int = 0, masks: bool = True) -> dict:
    """An exported sequence as TokenExporter._write writes it (the exporter's own derived columns included)."""
    n, p = len(seq.trainer), seq.prompt
    trainer = [-2.5 - 0.1 * i for i in range(p)] + seq.trainer  # the trainer scores the prompt tokens too
    inference = [0.0] * p + seq.inference
    log_ratio = [t - i for t, i in zip(trainer, inference, strict=True)]
    is_masked = ([False] * p + (seq.is_masked or [False] * n)) if masks else [None] * (p + n)
    return {"schema_version": 1, "step": step, "rank": rank, "micro_step": 0, "micro_sequence_idx": index,
            "export_sequence_idx": index, "env_name": "gsm8k",
            "token_ids": list(range(100, 100 + p + n)), "position_ids": list(range(p + n)),
            "loss_mask": [False] * p + [True] * n, "advantages": [seq.advantage] * (p + n),
            "inference_logprobs": inference, "trainer_logprobs": trainer,
            "entropy": [0.0] * p + seq.entropy,
            "mismatch_kl": [math.exp(d) - d - 1 for d in log_ratio], "log_importance_ratio": log_ratio,
            "importance_ratio": [math.exp(d) for d in log_ratio],
            "prob_delta": [math.exp(t) - math.exp(i) for t, i in zip(trainer, inference, strict=True)],
            "is_masked": is_masked, "is_masked_high": is_masked, "is_masked_low": [False if masks else None] * (p + n),
            "rl_weights": [None] * (p + n), "ce_weights": [None] * (p + n), "ref_kl_weights": [None] * (p + n)}


def write_prime_rl(root: Path, steps: dict[int, list[list[Seq]]], masks: bool = True) -> Path:
    """steps: step -> one list of sequences per rank."""
    for step, ranks in steps.items():
        folder = root / "token_exports" / f"step_{step}"
        folder.mkdir(parents=True, exist_ok=True)
        for rank, seqs in enumerate(ranks):
            lines = [json.dumps(prime_rl_line(s, step, rank, i, masks), separators=(",", ":"), allow_nan=False)
                     for i, s in enumerate(seqs)]
            (folder / f"rank_{rank}.jsonl").write_text("".join(line + "\n" for line in lines))
        (folder / "STABLE").touch()
    return root


def slime_sample(seq: Seq, position: int, masked_tail: int = 0) -> dict:
    import torch

    n = len(seq.trainer)
    mask = [1] * (n - masked_tail) + [0] * masked_tail
    return {"data_parallel_rank": 0, "rollout_position": position, "sample_index": position,
            "tokens": torch.arange(seq.prompt + n), "response_lengths": n, "total_lengths": seq.prompt + n,
            "rewards": 1.0, "truncated": int(seq.truncated), "loss_masks": torch.tensor(mask, dtype=torch.int),
            "rollout_log_probs": torch.tensor(seq.inference, dtype=torch.float32),
            "log_probs": torch.tensor(seq.trainer, dtype=torch.float32),
            "ref_log_probs": torch.tensor(seq.trainer, dtype=torch.float32) - 0.01,
            "advantages": torch.full((n,), seq.advantage, dtype=torch.float32),
            "returns": torch.full((n,), seq.advantage, dtype=torch.float32),
            "entropy": torch.tensor(seq.entropy, dtype=torch.float32)}


def write_slime(root: Path, rollouts: dict[int, list[dict]]) -> Path:
    import torch

    folder = root / "train_data"
    folder.mkdir(parents=True, exist_ok=True)
    for rollout_id, samples in rollouts.items():
        payload = {"format_version": 2, "rollout_id": rollout_id, "rank": 0, "samples": samples,
                   "dp_shards": [{"rank": 0, "data_parallel_rank": 0, "sample_indices": list(range(len(samples))),
                                  "partition": list(range(len(samples))), "micro_batch_indices": [[0]]}],
                   "raw_reward": [1.0] * len(samples)}
        torch.save(payload, folder / f"{rollout_id}.pt")
    return root
