"""slime's dumps in its writers' own layouts, field for field, for test_slime_layouts.py and the prime/slime ties tests.

- The per-rank train dumps, before format 2: THUDM/slime slime/utils/train_dump_utils.py `save_debug_train_data` at
  d38dc29c9 (the last commit before 681b3adca, #2266, replaced it; first inline in megatron_utils/actor.py at
  ed2f3a999, #93): each rank `torch.save(dict(rollout_id=..., rank=torch.distributed.get_rank(),
  rollout_data=rollout_data), f"{dump_details}/train_data/{rollout_id}_{rank}.pt")` (slime/utils/arguments.py).
  `rollout_data` is the rank's RolloutBatch after train_actor: the columns slime/ray/rollout.py
  `_split_train_data_by_dp` ships for the rank's data-parallel partition, `raw_reward` / `total_lengths` whole then
  `process_rollout_data`'s `total_lengths` and `local_raw_reward` for the partition, the batch schedule, then what
  the last pipeline stage computed: `log_probs`, `entropy` (forward_only), `ref_log_probs`, `kl`, `advantages`,
  `returns` (loss.py compute_advantages_and_returns). A stage before the last stores none of those.
- The rollout dumps: slime/observability/rollout_data_utils.py `save_debug_rollout_data` at 624b824a8:
  `torch.save({"rollout_id": rollout_id, "samples": [sample.to_dict() for sample in data]},
  f"{dump_details}/rollout_data/{rollout_id}.pt")`, `Sample.to_dict` (slime/utils/types.py) the dataclass's
  fields with status as its value and spec_info / prefix_cache_info as dicts.
"""
from __future__ import annotations

from pathlib import Path

import torch
from token_fixtures import Seq


def rank_payload(rollout_id: int, rank: int, seqs: list[Seq], indices: list[int], batch_rewards: list[float], *,
                 last_stage: bool = True, masked_tail: int = 0) -> dict:
    """One rank's file: its data-parallel shard `seqs` (sample indices `indices`) of a batch of `batch_rewards`."""
    n = [len(s.trainer) for s in seqs]
    masks = [torch.tensor([1] * (k - masked_tail) + [0] * masked_tail, dtype=torch.int) for k in n]
    local = [batch_rewards[i] for i in indices]
    data = {
        "tokens": [torch.arange(s.prompt + k, dtype=torch.long) for s, k in zip(seqs, n, strict=True)],
        "response_lengths": n, "rewards": local, "truncated": [int(s.truncated) for s in seqs],
        "loss_masks": masks, "sample_indices": list(indices), "rollout_ids": list(indices),
        "rollout_mask_sums": torch.tensor([float(m.sum()) for m in masks], dtype=torch.float32),
        "rollout_log_probs": [torch.tensor(s.inference, dtype=torch.float32) for s in seqs],
        "raw_reward": list(batch_rewards), "total_lengths": [s.prompt + k for s, k in zip(seqs, n, strict=True)],
        "global_batch_sizes": [len(batch_rewards)], "num_microbatches": [1],
        "micro_batch_indices": [list(range(len(seqs)))], "local_raw_reward": local,
    }
    if last_stage:
        data |= {"log_probs": [torch.tensor(s.trainer, dtype=torch.float32) for s in seqs],
                 "entropy": [torch.tensor(s.entropy, dtype=torch.float32) for s in seqs],
                 "ref_log_probs": [torch.tensor(s.trainer, dtype=torch.float32) - 0.01 for s in seqs],
                 "kl": [torch.zeros(k, dtype=torch.float32) for k in n],
                 "advantages": [torch.full((k,), s.advantage, dtype=torch.float32) for s, k in zip(seqs, n, strict=True)],
                 "returns": [torch.full((k,), s.advantage, dtype=torch.float32) for s, k in zip(seqs, n, strict=True)]}
    return dict(rollout_id=rollout_id, rank=rank, rollout_data=data)


def write_ranks(root: Path, rollout_id: int, payloads: dict[int, dict]) -> Path:
    folder = root / "train_data"
    folder.mkdir(parents=True, exist_ok=True)
    for rank, payload in payloads.items():
        torch.save(payload, folder / f"{rollout_id}_{rank}.pt")
    return root


def megatron_layout(rollout_id: int, shards: list[tuple[list[Seq], list[int]]], rewards: list[float], *,
                    tp: int = 2, pp: int = 1, masked_tail: int = 0) -> dict[int, dict]:
    """Every rank's file of a world of pp × dp × tp (Megatron's order: tp fastest, then dp, then pp): the tensor-
    parallel ranks of a shard write the same data; the stages before the last hold no log-probs."""
    out, rank = {}, 0
    for stage in range(pp):
        for seqs, indices in shards:
            for _ in range(tp):
                out[rank] = rank_payload(rollout_id, rank, seqs, indices, rewards, last_stage=stage == pp - 1,
                                         masked_tail=masked_tail)
                rank += 1
    return out


def sample_dict(index: int, group_index: int | None, reward, *, prompt: str = "What is 2 + 2?",
                response_length: int = 12, status: str = "completed") -> dict:
    """Sample.to_dict() at 624b824a8, every field."""
    return {"group_index": group_index, "index": index, "rollout_id": None, "prompt": prompt,
            "tokens": list(range(5 + response_length)), "multimodal_inputs": None, "multimodal_train_inputs": None,
            "multimodal_train_input_id": None, "apply_chat_template_kwargs": {}, "response": "4" * response_length,
            "response_length": response_length, "label": "4", "reward": reward,
            "loss_mask": [1] * response_length, "weight_versions": ["1"],
            "rollout_log_probs": [-0.5] * response_length, "rollout_top_p_token_ids": None,
            "rollout_top_p_token_offsets": None, "rollout_routed_experts": None, "remove_sample": False,
            "teacher_log_probs": None, "status": status, "metadata": {}, "generate_function_path": None,
            "custom_rm_path": None, "train_metadata": None, "session_id": None, "non_generation_time": 0.0,
            "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0,
                          "completion_token_num": response_length},
            "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": 5}}


def groups_of(rewards: list[list], *, group_ids: bool = True, first_index: int = 0) -> list[dict]:
    """A rollout's samples, group by group as slime's data source makes them (n copies of a prompt, one
    group_index, consecutive indices)."""
    out, index = [], first_index
    for g, members in enumerate(rewards):
        for r in members:
            out.append(sample_dict(index, g if group_ids else None, r, prompt=f"prompt {g}"))
            index += 1
    return out


def write_rollout(root: Path, rollout_id: int, samples: list[dict]) -> Path:
    folder = root / "rollout_data"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{rollout_id}.pt"
    torch.save({"rollout_id": rollout_id, "samples": samples}, path)
    return path
