"""What each step's figure draws, from a recorded step (engine/step_records.py): plain numbers for the
templates (templates/smollm/figures.html), no torch. Widths are percentages of the figure's own width,
so a figure never scrolls sideways on a phone."""
from __future__ import annotations

import math
from dataclasses import dataclass

from app.kinds.smollm.engine.step_records import SmolStepResult, TokenMove

MAX_ATTENTION_ROWS = 48  # the answer's tokens drawn as rows (T ≤ 96: the first 48)
# The attention map is drawn at 1:1 (its own box scrolls sideways on a phone): a cell per position, each
# row and column labelled with its token in 11 px monospace (6.7 px a character), at most LABEL_CHARS long.
CELL_W, CELL_H = 12, 13
LABEL_PX, CHAR_PX, LABEL_CHARS = 11, 6.7, 12


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
    inner_steps: int  # μ: the recorded step is the group's μ-th update (TRL's num_iterations)
    learning_rate: float

    @property
    def clip_fraction(self) -> float:
        """The share of the answers' tokens the clip stops (TRL logs it as clip_ratio/region_mean)."""
        return self.clipped / self.tokens if self.tokens else 0.0


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


def token_label(text: str) -> str:
    """A token as a label can show it: a newline as ↵, a tab as ⇥, a leading or trailing space as ␣ (the
    label is SVG text, where spaces collapse), cut to LABEL_CHARS with … (its <title> says it whole)."""
    shown = text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "")
    stripped = shown.strip(" ")
    if stripped != shown:
        lead, trail = len(shown) - len(shown.lstrip(" ")), len(shown) - len(shown.rstrip(" "))
        shown = "␣" * lead + stripped + "␣" * trail
    shown = shown or "∅"
    return shown if len(shown) <= LABEL_CHARS else shown[:LABEL_CHARS - 1] + "…"


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
    column_tokens: tuple[str, ...] = ()  # the token at each position (the prompt's, then the answer's)

    # The drawing, at 1:1 in px: row labels at the left, column labels (read upwards) on top.
    cell_w: int = CELL_W
    cell_h: int = CELL_H
    label_px: int = LABEL_PX

    @property
    def row_labels(self) -> tuple[str, ...]:
        return tuple(token_label(t) for t in self.row_tokens)

    @property
    def column_labels(self) -> tuple[str, ...]:
        return tuple(token_label(t) for t in self.column_tokens)

    @property
    def column_step(self) -> int:
        """Every k-th column is labelled: every one while a cell is as wide as a line of label text."""
        return max(1, math.ceil(self.label_px / self.cell_w))

    @property
    def left(self) -> float:
        """The row labels' column: the longest label, right-aligned against the map."""
        return round(max((len(t) for t in self.row_labels), default=1) * CHAR_PX + 8, 1)

    @property
    def top(self) -> float:
        return round(max((len(t) for t in self.column_labels), default=1) * CHAR_PX + 8, 1)

    @property
    def width(self) -> float:
        return self.left + self.columns * self.cell_w + 2

    @property
    def height(self) -> float:
        return self.top + len(self.cells) * self.cell_h + 2


@dataclass(frozen=True)
class Against:
    """A row of the moved table whose log π went against its answer's advantage, and why (see `_why`)."""
    move: TokenMove
    advantage: float
    reason: str  # "kl", "shared" or "adam"


@dataclass(frozen=True)
class MovedFigure:
    moved: tuple[TokenMove, ...]
    loss: float
    surrogate: float
    kl: float
    up: int  # of the answers' tokens, how many log π rose
    down: int
    against: tuple[Against, ...] = ()  # the table's rows that moved against their advantage's sign
    against_all: int = 0  # the same count over every answer token
    why: str = ""  # one sentence: why those rows went the other way ("" when none did)

    @property
    def against_keys(self) -> frozenset[tuple[int, int]]:
        return frozenset((a.move.completion, a.move.position) for a in self.against)


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
                       min(ratios, default=1.0), max(ratios, default=1.0), sum(r.clipped for r in rows), len(ratios),
                       int(getattr(p, "inner_steps", 1)), float(getattr(p, "learning_rate", 0.0)))


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
    positions = [*result.prompt_tokens, *(t.text for t in answer.tokens)]
    columns = tuple(positions[i] if i < len(positions) else "" for i in range(n))
    return AttentionFigure(result.attention_block, completion, head, len(weights), len(result.attention), n,
                           result.prompt_length, tuple(labels[:len(cells)]), cells, share, columns)


def moved_figure(result: SmolStepResult) -> MovedFigure:
    deltas = [t.logp_after - t.logp for c in result.completions for t in c.tokens]
    against = tuple(Against(m, result.completions[m.completion].advantage, _reason(result, m))
                    for m in result.moved if _goes_against(m.delta, result.completions[m.completion].advantage))
    against_all = sum(_goes_against(t.logp_after - t.logp, c.advantage) for c in result.completions for t in c.tokens)
    return MovedFigure(result.moved, result.loss, result.loss_surrogate, result.loss_kl,
                       sum(d > 0 for d in deltas), sum(d < 0 for d in deltas), against, against_all, _why(against))


def _goes_against(delta: float, advantage: float) -> bool:
    """log π moved the other way from its answer's advantage (an answer with A = 0 has no way to go)."""
    return delta * advantage < 0


def _reason(result: SmolStepResult, move: TokenMove) -> str:
    """Why a token's log π moved against its advantage, by what the step recorded of it:
    - "kl": its own gradient already points against A (∂loss/∂log π has A's sign, so descent lowers log π
      for A > 0), which only the KL part can do: the surrogate part follows A or is clipped to 0;
    - "shared": the same token id is in an answer whose advantage has the other sign: both push its logit;
    - "adam": neither, so it is the update itself: every token's log π moves with weights all answers share,
      and AdamW divides each weight's step by its own running gradient size, so no token need follow its
      own gradient's sign (the tiny LM's update step shows the same on its re-run parts)."""
    answer = result.completions[move.completion]
    token = answer.tokens[move.position]
    if token.grad * answer.advantage > 0 and token.grad_kl != 0:
        return "kl"
    token_id = answer.token_ids[move.position]
    if any(token_id in other.token_ids for other in result.completions if other.advantage * answer.advantage < 0):
        return "shared"
    return "adam"


REASONS = {
    "kl": "the KL term pulls {tokens} back toward the reference harder than the clipped surrogate pushes",
    "shared": "{tokens} also {verb} in answers whose advantage has the other sign, and their pushes on the same "
              "token compete",
    "adam": "{tokens} {verb_move} with weights every answer shares, and AdamW divides each weight's step by its own "
            "running gradient size, so a token's log π need not follow its own gradient's sign",
}


def _why(against: tuple[Against, ...]) -> str:
    """One sentence: what sends each row of `against` the other way ("" when none goes)."""
    if not against:
        return ""
    parts = []
    for reason, template in REASONS.items():
        rows = [a for a in against if a.reason == reason]
        if rows:
            names = ", ".join(f"#{a.move.completion} “{a.move.token}”" for a in rows)
            one = len(rows) == 1
            parts.append(template.format(tokens=names, verb="appears" if one else "appear",
                                         verb_move="moves" if one else "move"))
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."
