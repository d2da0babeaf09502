"""One evaluation point of a training path on the running-sums task: samples of the
held-out prompts, scored by R1's rules and read for their habit, overall and per difficulty.

What R1-Zero's Figure 3 plots is the mean length of sampled responses; Dr. GRPO (Liu et al.
2025, arXiv 2503.20783, Fig. 5) splits it into correct and incorrect responses, which is where
GRPO's per-completion length normalisation shows: so both are kept, and so is the share of
answers that work step by step, and how often a step is recomputed (the re-check).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.kinds.tiny_lm.domain.arith_task import encode
from app.kinds.tiny_lm.domain.sums_task import SumPrompt, habit
from app.kinds.tiny_lm.engine.lm_rollout import bucket_rewards
from app.kinds.tiny_lm.engine.lm_sampling import sample_groups
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM


@dataclass(frozen=True)
class Scored:
    """One sampled completion, as the statistics need it."""
    difficulty: int
    length: int  # completion tokens, its <end> included
    correct: bool
    formatted: bool
    mixed: bool  # some of its reasoning is not in the prompt's script
    stepwise: bool
    recheck: bool
    entropy: float  # summed over its tokens (nats)
    kl: float  # summed over its tokens


@dataclass(frozen=True)
class Stats:
    """Statistics of a set of sampled completions (see PathPoint for what each means).
    mean_length_correct / _incorrect, accuracy_stepwise / _guess: None when no completion of that kind
    was sampled."""
    completions: int
    accuracy: float
    format_rate: float
    mixed_rate: float
    mean_length: float
    mean_length_correct: float | None
    mean_length_incorrect: float | None
    stepwise_share: float
    recheck_share: float
    accuracy_stepwise: float | None  # accuracy of the completions that work step by step
    accuracy_guess: float | None  # of the formatted ones that do not (a one-jump guess)
    entropy: float
    kl_to_reference: float


def _mean(values: list[float] | list[int] | list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def stats(rows: list[Scored]) -> Stats:
    n = len(rows)
    tokens = sum(r.length for r in rows)
    return Stats(n, sum(r.correct for r in rows) / n, sum(r.formatted for r in rows) / n,
                 sum(r.mixed for r in rows) / n, tokens / n,
                 _mean([r.length for r in rows if r.correct]), _mean([r.length for r in rows if not r.correct]),
                 sum(r.stepwise for r in rows) / n, sum(r.recheck for r in rows) / n,
                 _mean([r.correct for r in rows if r.stepwise]),
                 _mean([r.correct for r in rows if r.formatted and not r.stepwise]),
                 sum(r.entropy for r in rows) / tokens, sum(r.kl for r in rows) / tokens)


@torch.no_grad()
def score(model: TinyLM, reference: TinyLM, prompts: list[SumPrompt], samples: int, max_new: int,
          seed: int) -> list[Scored]:
    """`samples` completions per prompt at temperature 1 (the same seed at every call, so two models
    are compared on the same random numbers). Entropy and KL are exact over the vocabulary at every
    sampled token: H(π(·|ctx)) and Σ_v π(v)·(log π(v) − log π_ref(v))."""
    out: list[Scored] = []
    for b in sample_groups(model, [encode(p.text) for p in prompts], samples, max_new, seed):
        g = b.group
        start = g.prompt_length - 1  # the position predicting the first completion token
        logp = F.log_softmax(model(g.ids[:, :-1]).double(), dim=-1)[:, start:]
        logq = F.log_softmax(reference(g.ids[:, :-1]).double(), dim=-1)[:, start:]
        mask = g.mask.double()
        p = logp.exp()
        entropy = (-(p * logp).sum(-1) * mask).sum(-1).tolist()
        kl = ((p * (logp - logq)).sum(-1) * mask).sum(-1).tolist()
        lengths = mask.sum(-1).tolist()
        for row, (text, parts) in enumerate(zip(g.completions, bucket_rewards(b, prompts), strict=True)):
            h = habit(text)
            out.append(Scored(prompts[b.members[row // samples]].difficulty, int(lengths[row]),
                              parts.accuracy == 1, parts.format == 1, parts.language < 1, h.stepwise,
                              h.rechecks > 0, entropy[row], kl[row]))
    return out


def by_difficulty(rows: list[Scored]) -> dict[int, Stats]:
    return {d: stats([r for r in rows if r.difficulty == d]) for d in sorted({r.difficulty for r in rows})}
