"""What each step's figure draws, from a recorded step (engine/step_records.py): plain numbers for the
templates (templates/smollm/figures.html), no torch. Widths are percentages of the figure's own width,
so a figure never scrolls sideways on a phone."""
from __future__ import annotations

import math
from dataclasses import dataclass

from app.kinds.smollm.engine.step_records import SmolStepResult, TokenMove

MAX_ATTENTION_ROWS = 48  # the answer's tokens drawn as rows (T ≤ 96: the first 48)


@dataclass(frozen=True)
class TokenChip:
    text: str
    ratio: float
    clipped: bool  # the clip stops this token's push
    tint: float  # −1 … 1: how far ρ is from 1, in units of ε (clamped), for the chip's colour


@dataclass(frozen=True)
class AnswerRow:
    index: int
    text: str
    length: int
    stopped: bool
    parts: tuple[tuple[str, float], ...]
    reward: float
    advantage: float
    bar: float  # |advantage| as % of the largest |advantage| in the group
    tokens: tuple[TokenChip, ...]
    clipped: int  # tokens the clip stops


@dataclass(frozen=True)
class GroupFigure:
    rows: tuple[AnswerRow, ...]
    mean: float
    spread: float  # the standard deviation the conventions divide by (population or sample), before ε
    spread_kind: str
    epsilon: float
    clip_epsilon: float
    clip_epsilon_high: float
    all_equal: bool  # every reward the same: every advantage is 0
    ratio_min: float
    ratio_max: float
    clipped: int
    tokens: int


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    width: float  # % of the largest


@dataclass(frozen=True)
class BlockFigure:
    blocks: tuple[Bar, ...]
    others: tuple[Bar, ...]
    total: float
    top: tuple[int, ...]  # the three blocks with the largest norms; () when no gradient reached any
    tied: bool  # every answer the same reward: every advantage 0


@dataclass(frozen=True)
class AttentionFigure:
    block: int
    completion: int
    head: int
    heads: int
    answers: int
    columns: int  # the positions a row can see: the prompt, then the answer
    prompt_length: int
    row_tokens: tuple[str, ...]
    cells: tuple[tuple[float, ...], ...]  # rows × columns, each row's weights (0 beyond the causal edge)
    prompt_share: tuple[float, ...]  # per head: the mean weight the answer's rows put on the prompt


@dataclass(frozen=True)
class MovedFigure:
    moved: tuple[TokenMove, ...]
    loss: float
    surrogate: float
    kl: float
    up: int  # of the answers' tokens, how many log π rose
    down: int


def group_figure(result: SmolStepResult) -> GroupFigure:
    p = result.params
    rewards = [c.reward_used for c in result.completions]
    mean = sum(rewards) / len(rewards)
    sample = p.advantage_std == "sample"
    n = len(rewards) - 1 if sample else len(rewards)
    spread = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n) if n > 0 else 0.0
    biggest = max((abs(c.advantage) for c in result.completions), default=0.0) or 1.0
    eps_low, eps_high = float(p.clip_epsilon), float(p.clip_epsilon_high)
    rows, ratios = [], []
    for i, c in enumerate(result.completions):
        chips = []
        for t in c.tokens:
            off = (t.ratio - 1) / (eps_high if t.ratio >= 1 else eps_low)
            chips.append(TokenChip(t.text, t.ratio, t.clip_active, max(-1.0, min(1.0, off))))
            ratios.append(t.ratio)
        rows.append(AnswerRow(i, c.text, c.length, c.stopped, tuple(c.reward_parts.items()), c.reward, c.advantage,
                              100 * abs(c.advantage) / biggest, tuple(chips), sum(ch.clipped for ch in chips)))
    return GroupFigure(tuple(rows), mean, spread, str(p.advantage_std),
                       float(p.advantage_epsilon), eps_low, eps_high, len(set(rewards)) == 1,
                       min(ratios, default=1.0), max(ratios, default=1.0), sum(r.clipped for r in rows), len(ratios))


def block_figure(result: SmolStepResult) -> BlockFigure:
    norms = result.block_grad_norms
    biggest = max([*norms, *result.other_grad_norms.values()], default=0.0) or 1.0
    blocks = tuple(Bar(str(i), g, 100 * g / biggest) for i, g in enumerate(norms))
    others = tuple(Bar(name, g, 100 * g / biggest) for name, g in result.other_grad_norms.items())
    top = tuple(sorted((i for i in range(len(norms)) if norms[i] > 0), key=lambda i: -norms[i])[:3])
    tied = len({c.reward_used for c in result.completions}) == 1
    return BlockFigure(blocks, others, result.policy_grad_norm, top, tied)


def attention_figure(result: SmolStepResult, completion: int, head: int) -> AttentionFigure:
    """Answer `completion`'s rows of head `head` in the recorded block. Row t is the position that reads
    the answer's token t + 1 (log π of token t + 1 is read there); the first row is the prompt's last."""
    weights = result.attention[completion]  # (H, n, n)
    n, start = len(weights[head]), result.prompt_length - 1
    rows = range(start, min(n, start + MAX_ATTENTION_ROWS))
    answer = result.completions[completion]
    labels = ["(prompt end)", *(t.text for t in answer.tokens)]
    # Shaded relative to each row's own largest weight: a row spreads 1 over up to ~150 positions, so
    # absolute shading would leave all but the strongest cells white (the caption says so).
    cells = tuple(tuple(w / (max(weights[head][r][:n]) or 1.0) for w in weights[head][r][:n]) for r in rows)
    share = tuple(sum(sum(w[r][:result.prompt_length]) for r in rows) / max(1, len(rows)) for w in weights)
    return AttentionFigure(result.attention_block, completion, head, len(weights), len(result.attention), n,
                           result.prompt_length, tuple(labels[:len(cells)]), cells, share)


def moved_figure(result: SmolStepResult) -> MovedFigure:
    deltas = [t.logp_after - t.logp for c in result.completions for t in c.tokens]
    return MovedFigure(result.moved, result.loss, result.loss_surrogate, result.loss_kl,
                       sum(d > 0 for d in deltas), sum(d < 0 for d in deltas))
