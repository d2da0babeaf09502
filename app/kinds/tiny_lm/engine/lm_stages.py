"""The stages the tiny LM's training paths are made of (DeepSeek-R1 §2.2-2.4): GRPO
with rule rewards, supervised fine-tuning on (prompt, completion) texts, rejection sampling,
and the distillation student's own pre-training. Each trains a model in place and calls
`on_step(step)` after every unit of work, so the caller can measure and report progress.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import token_grpo_step
from app.kinds.tiny_lm.domain.arith_task import PAD, TOKEN_ID, encode
from app.kinds.tiny_lm.domain.sums_task import SumPrompt
from app.kinds.tiny_lm.engine.lm_rollout import bucket_rewards
from app.kinds.tiny_lm.engine.lm_sampling import sample_groups
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM, completion_logprobs

OnStep = Callable[[int], None]
MAX_NEW = 56  # completion tokens; the longest running sum with a re-check is 53


def _draw_seed(gen: torch.Generator) -> int:
    return int(torch.randint(2**31 - 1, (1,), generator=gen))


@dataclass(frozen=True)
class GRPORecipe:
    steps: int
    reward: tuple[str, ...]  # RewardParts fields summed into the scalar reward
    prompts_per_step: int = 8
    group_size: int = 8  # G (R1 used 16; 8 keeps a step cheap on a CPU)
    inner_steps: int = 1  # μ: updates per sampled batch (R1: one, so π_old = π_θ at each update)
    learning_rate: float = 2e-3
    weight_decay: float = 0.0


def grpo_stage(policy: TinyLM, reference: TinyLM, pool: list[SumPrompt], recipe: GRPORecipe,
               conventions: Conventions, seed: int, on_step: OnStep) -> None:
    """`recipe.steps` GRPO iterations: sample G completions for each of a batch of prompts from
    the current policy (π_old), score them with the rule rewards, and take μ AdamW steps on
    `token_grpo_step`'s loss, averaged over the batch's groups."""
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    device = next(policy.parameters()).device
    for step in range(1, recipe.steps + 1):
        picks = torch.randint(len(pool), (recipe.prompts_per_step,), generator=gen).tolist()
        prompts = [pool[i] for i in picks]
        buckets = sample_groups(policy, [encode(p.text) for p in prompts], recipe.group_size, MAX_NEW,
                                _draw_seed(gen))
        batch = []
        with torch.no_grad():
            for b in buckets:
                r = torch.tensor([p.total(recipe.reward) for p in bucket_rewards(b, prompts)],
                                 dtype=torch.float64, device=device)
                g = b.group
                old = completion_logprobs(policy, g.ids, g.prompt_length)
                ref = completion_logprobs(reference, g.ids, g.prompt_length)
                batch.append((b, r, old, ref))
        for _ in range(recipe.inner_steps):
            loss = torch.zeros((), dtype=torch.float64, device=device)
            for b, r, old, ref in batch:
                g = b.group
                logp = completion_logprobs(policy, g.ids, g.prompt_length)
                for j in range(len(b.members)):
                    rows = b.rows(j)
                    out = token_grpo_step(logp[rows].double(), old[rows].double(), ref[rows].double(), r[rows],
                                          g.mask[rows], conventions)
                    loss = loss + out.loss
            loss = loss / recipe.prompts_per_step
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        on_step(step)


def sft_tensors(texts: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, L) ids of prompt + completion, right-padded, and (N, L − 1) targets in which the prompt's
    own tokens and the padding are <pad> (ignored): the loss is on the completion only."""
    rows = [(encode(p), encode(c)) for p, c in texts]
    width = max(len(p) + len(c) for p, c in rows)
    pad = TOKEN_ID[PAD]
    ids = torch.tensor([p + c + [pad] * (width - len(p) - len(c)) for p, c in rows])
    targets = ids[:, 1:].clone()
    for i, (p, _) in enumerate(rows):
        targets[i, :len(p) - 1] = pad
    return ids, targets


def sft_loss(model: TinyLM, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=TOKEN_ID[PAD])


@dataclass(frozen=True)
class SFTRecipe:
    steps: int
    batch_size: int = 32
    learning_rate: float = 2e-3
    weight_decay: float = 0.01


def sft_stage(model: TinyLM, texts: list[tuple[str, str]], recipe: SFTRecipe, seed: int, on_step: OnStep) -> None:
    """`recipe.steps` AdamW steps of completion-only cross-entropy on seeded batches of `texts`."""
    if not texts:  # nothing survived curation: the stage cannot train
        for step in range(1, recipe.steps + 1):
            on_step(step)
        return
    device = next(model.parameters()).device
    ids, targets = (t.to(device) for t in sft_tensors(texts))
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    for step in range(1, recipe.steps + 1):
        pick = torch.randint(len(ids), (min(recipe.batch_size, len(ids)),), generator=gen).to(device)
        loss = sft_loss(model, ids[pick], targets[pick])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        on_step(step)


def rejection_sample(model: TinyLM, pool: list[SumPrompt], samples: int, batches: int, seed: int,
                     on_step: OnStep) -> tuple[list[tuple[str, str]], int]:
    """`samples` completions of every prompt of `pool` (in `batches` batches), keeping those that are
    right, formatted and written in the prompt's script only. Returns (kept texts, sampled count)."""
    gen = torch.Generator().manual_seed(seed)
    kept: list[tuple[str, str]] = []
    sampled = 0
    size = -(-len(pool) // batches)
    for step in range(1, batches + 1):
        prompts = pool[(step - 1) * size:step * size]
        buckets = sample_groups(model, [encode(p.text) for p in prompts], samples, MAX_NEW, _draw_seed(gen))
        for b in buckets:
            texts = b.group.completions
            for text, parts, row in zip(texts, bucket_rewards(b, prompts), range(len(texts)), strict=True):
                prompt = prompts[b.members[row // samples]]
                sampled += 1
                if parts.accuracy == 1 and parts.format == 1 and parts.language == 1:
                    kept.append((prompt.text, text))
        on_step(step)
    return kept, sampled
