"""What a train/inference importance-sampling correction does to one step's gradient (issue 34), recomputed by the
shared token-level engine (app/engine/grpo/token_step.py, the one every kind runs), not re-typed here.

A run's per-token files give, for each trained token, its advantage A and d = log π_trainer − log π_rollout. The
IS correction multiplies each token's policy term by a weight made from ρ = exp(d) (TRL's vLLM correction, verl's
rollout correction, slime's TIS/MIS): truncated (TIS: min(ρ, C)) or masked (0 outside [1/C, C]), per token or per
sequence. Here each of the four is run through `token_grpo_step` with the step's numbers and autograd gives
∂loss/∂log π_θ per token, beside the same gradient with no correction; three numbers say how far apart they are:

- `norm_ratio` ‖g_mode‖ / ‖g_none‖: how much the correction grows or shrinks the step;
- `cosine` between g_mode and g_none: whether it also turns it (1: the same direction);
- `capped_share` (truncate) or `dropped_share` (mask): the share of Σ|g_none| on the tokens where the
  correction's bound binds (the weight cut to C, or set to 0).

The setting, as the frameworks run the correction at num_iterations = 1: π_old is the trainer's own log-probs, so
ρ_θ/old = 1 and the PPO clip never binds, and the gradient of a token is −w·A·weight (w its aggregation weight).
The engine takes the difference log π_old − log π_rollout only, so log π_θ = log π_old = 0 and log π_rollout = −d
give it the very d of the file. β = 0 (no reference here). The aggregation is the token mean (TRL's dapo, verl's
token-mean, prime-rl's and slime's per-token loss): the files do not say the trainer's, and it is the one under
which a token's row in the batch changes nothing.

The sequence-level modes weigh a whole sequence by exp(Σ d) over its trained tokens: TRL's sequence_truncate /
sequence_mask and verl's rollout_is="sequence", the product of the token ratios. (The `tokens/seq_outside_is_band`
share is of the geometric mean exp(mean d), verl's "geometric" rejection: a different, much milder, test.) They
need one advantage per sequence, as GRPO gives; a step whose advantages vary inside a sequence (PPO's GAE in slime)
gets the token-level numbers only.

Bounded memory: the step's arrays (8 bytes a trained token each) and the engine's tensors of one chunk at a time
(CHUNK_CELLS cells, padding included); a chunk's token-mean gradient is rescaled by its share of the step's tokens,
the token mean's own decomposition.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import token_grpo_step
from app.engine.runtime.device import intra_op_threads
from app.runs.domain.token_stats import IS_GRAD_METRIC, IS_THRESHOLD

NONE = "none"
TOKEN_MODES = ("token_truncate", "token_mask")
SEQUENCE_MODES = ("sequence_truncate", "sequence_mask")
MODES = (*TOKEN_MODES, *SEQUENCE_MODES)
CHUNK_CELLS = 1 << 15  # engine cells per chunk: ~30 float64 tensors of 256 KB at a time (16 K to 64 K: the fastest)


@dataclass(frozen=True)
class TrainedTokens:
    """One step's trained tokens, sequences back to back (the order of the files)."""
    log_ratio: np.ndarray  # d = log π_trainer − log π_rollout, finite
    advantages: np.ndarray
    lengths: np.ndarray  # trained tokens of each sequence, in order; sums to log_ratio.size

    def per_sequence_advantage(self) -> np.ndarray | None:
        """One advantage per sequence, or None where some sequence's tokens do not share one."""
        lengths = self.lengths.astype(np.int64)
        starts, filled = np.cumsum(lengths) - lengths, lengths > 0
        out = np.zeros(lengths.size)
        out[filled] = self.advantages[starts[filled]]
        return out if np.array_equal(np.repeat(out, lengths), self.advantages) else None


def conventions(mode: str, threshold: float = IS_THRESHOLD) -> Conventions:
    """TRL's conventions (token mean, β = 0) with the correction `mode` at the band [1/C, C]: truncation has the
    upper bound only (TIS, min(ρ, C): verl's and slime's, tokens/tis_weight_scale's), masking both."""
    if mode == NONE:
        return Conventions(preset="trl", is_correction="none")
    low = 1 / threshold if mode.endswith("mask") else None
    return Conventions(preset="trl", is_correction=mode, is_clip_min=low, is_clip_max=threshold)


@dataclass(frozen=True)
class _Chunk:
    rows: np.ndarray  # (R,) row lengths
    index: np.ndarray  # (R, W) positions in the step's arrays (clamped where padding)
    valid: np.ndarray  # (R, W) bool: a real token
    advantages: np.ndarray  # (R,)
    tokens: int


def _chunks(lengths: np.ndarray, starts: np.ndarray, advantages: np.ndarray, last: int) -> Iterator[_Chunk]:
    """Rows grouped so that rows × widest row ≤ CHUNK_CELLS (a longer row is a chunk of its own); one-token rows
    (the token modes' layout) in plain slices."""
    n = lengths.size
    if n and int(lengths.max()) == 1:
        bounds = list(range(0, n, CHUNK_CELLS)) + [n]
    else:
        bounds, i = [0], 0
        while i < n:  # one step's sequences: hundreds to thousands of rows
            j, width = i + 1, int(lengths[i])
            while j < n and (j + 1 - i) * max(width, int(lengths[j])) <= CHUNK_CELLS:
                width = max(width, int(lengths[j]))
                j += 1
            bounds.append(j)
            i = j
    for i, j in zip(bounds[:-1], bounds[1:], strict=False):
        rows = lengths[i:j]
        cols = np.arange(int(rows.max()))
        valid = cols[None, :] < rows[:, None]
        index = np.minimum(starts[i:j, None] + cols[None, :], last)
        yield _Chunk(rows, index, valid, advantages[i:j], int(rows.sum()))


def gradient(tokens: TrainedTokens, mode: str, threshold: float = IS_THRESHOLD) -> tuple[np.ndarray, np.ndarray]:
    """∂loss/∂log π_θ of every trained token under `mode` (or "none"), and where the correction's bound binds
    (the weight truncated or masked). Token modes lay each token out as a row of its own (no padding: under the
    token mean the layout changes nothing), the sequence modes one sequence a row. ValueError for a sequence mode
    on a step whose advantages vary inside a sequence."""
    n = tokens.log_ratio.size
    grad, hit = np.zeros(n), np.zeros(n, dtype=bool)
    if n == 0:
        return grad, hit
    if mode in SEQUENCE_MODES:
        seq_adv = tokens.per_sequence_advantage()
        if seq_adv is None:
            raise ValueError("a sequence-level correction needs one advantage per sequence")
        lengths = tokens.lengths.astype(np.int64)
        keep = lengths > 0
        lengths, seq_adv = lengths[keep], seq_adv[keep]
    else:
        lengths, seq_adv = np.ones(n, dtype=np.int64), tokens.advantages
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    c = conventions(mode, threshold)
    at = 0
    for chunk in _chunks(lengths, starts, seq_adv, n - 1):
        mask = torch.from_numpy(chunk.valid.astype(np.float64))
        sampling = torch.from_numpy(np.where(chunk.valid, -tokens.log_ratio[chunk.index], 0.0))
        logp = torch.zeros_like(mask, requires_grad=True)
        zeros = torch.zeros_like(mask)
        step = token_grpo_step(logp, zeros, zeros, torch.zeros(mask.shape[0], dtype=torch.float64), mask, c,
                               logp_sampling=sampling, advantages=torch.from_numpy(chunk.advantages.copy()))
        (g,) = torch.autograd.grad(step.loss, logp)
        # the chunk's token mean divides by its own tokens; the step's by all of them
        grad[at:at + chunk.tokens] = g.numpy()[chunk.valid] * (chunk.tokens / n)
        hit[at:at + chunk.tokens] = step.is_bound_hit.numpy()[chunk.valid]
        at += chunk.tokens
    return grad, hit


def is_effect_metrics(tokens: TrainedTokens, threshold: float = IS_THRESHOLD) -> dict[str, float]:
    """`tokens/is_grad/<mode>/{norm_ratio, cosine, capped_share | dropped_share}` for each correction; nothing
    where the uncorrected gradient is 0 (every advantage 0: there is nothing to correct).

    One intra-op thread: each op is a chunk of 32 K cells, where a parallel region's start and barrier cost more
    than a second thread gives back (on a shared 2-core machine a step of 98 K tokens took 80 to 170 ms with two
    threads, 30 to 45 ms with one). The caller's own count is restored after."""
    with intra_op_threads(1):
        return _metrics(tokens, threshold)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a·b without BLAS: numpy's dot and norm call OpenBLAS, whose threads spin; on a busy 2-core machine they
    took 10 ms a call on 98 K numbers, this 0.1 ms."""
    return float(np.multiply(a, b).sum())


def _metrics(tokens: TrainedTokens, threshold: float) -> dict[str, float]:
    g0, _ = gradient(tokens, NONE, threshold)
    norm0, mass0 = math.sqrt(_dot(g0, g0)), float(np.abs(g0).sum())
    if not norm0 > 0:
        return {}
    out: dict[str, float] = {}
    modes = MODES if tokens.per_sequence_advantage() is not None else TOKEN_MODES
    for mode in modes:
        g, hit = gradient(tokens, mode, threshold)
        norm = math.sqrt(_dot(g, g))
        out[IS_GRAD_METRIC.format(mode=mode, stat="norm_ratio")] = norm / norm0
        if norm > 0:  # a gradient masked whole has no direction
            out[IS_GRAD_METRIC.format(mode=mode, stat="cosine")] = _dot(g, g0) / (norm * norm0)
        share = "dropped_share" if mode.endswith("mask") else "capped_share"
        out[IS_GRAD_METRIC.format(mode=mode, stat=share)] = float(np.abs(g0[hit]).sum()) / mass0
    return out


__all__ = ["MODES", "NONE", "TrainedTokens", "conventions", "gradient", "is_effect_metrics"]
