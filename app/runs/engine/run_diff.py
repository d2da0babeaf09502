"""Two recorded steps of one run, compared (issue 34): each record recomputed by torch under its own conventions
(the step-record kind's engine/step.py: the ratios, KL and advantages its loss saw), then the same quantities
of both set side by side (domain/two_sample.py), the prompts the two steps share, and the tokens whose log π_θ
moved most.

Per-token quantities count trained tokens only (loss mask 1), as every per-token number of the app does. A
value that is not finite (a ratio that overflowed) is left out of its distribution, and counted.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.cache import recomputed
from app.runs.domain.two_sample import TwoSamples, two_samples

# The quantities compared, in the page's order: (name, per what)
QUANTITIES = (("ratio", "trained token"), ("kl", "trained token"), ("entropy", "trained token"),
              ("advantage", "completion"), ("length", "completion"), ("reward", "completion"))
MIN_TOKEN_COUNT = 3  # a token id is compared when it occurs this often among trained tokens in both steps
KEEP = 4  # diffs kept (diff_steps): each holds only summaries and its tables, a few KB
_diffs: OrderedDict[tuple[int, str, int, str], RunDiff] = OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True)
class StepArrays:
    """What one recorded step's diff reads: per quantity its values (None: not recorded at this step), and per
    completion its prompt, reward, length and whether its group tied."""
    step: int
    values: dict[str, np.ndarray | None]
    left_out: dict[str, int]  # non-finite values dropped from each quantity
    prompts: tuple[str, ...]
    rewards: np.ndarray  # Σ w·r, NaN where no function scored it
    lengths: np.ndarray  # trained tokens of each completion
    tied: np.ndarray  # its group's scored rewards all equal (GRPO's advantage 0 for the whole group)
    token_ids: np.ndarray  # every trained token, in record order
    token_logp: np.ndarray  # its recorded log π_θ
    token_text: dict[int, str]  # an id's text, as the record spells it the first time


def step_arrays(step: int, key: str, record: StepRecord) -> StepArrays:
    """`key`: the record's catalog id (the recompute cache's key)."""
    r = recomputed(key, record)
    rows = record.completions()
    masks = [c.mask.astype(bool) for c in r.completions]
    trained = [(item, m) for (_, _, item), m in zip(rows, masks, strict=True)]
    lengths = np.asarray([m.sum() for m in masks], dtype=np.float64)
    values: dict[str, np.ndarray | None] = {
        "ratio": np.concatenate([c.ratio[m] for c, m in zip(r.completions, masks, strict=True)]),
        "kl": (np.concatenate([c.kl[m] for c, m in zip(r.completions, masks, strict=True)])
               if all(item.ref_logprobs is not None for _, _, item in rows) else None),
        "entropy": (np.concatenate([np.asarray(item.entropy, dtype=np.float64)[m] for item, m in trained])
                    if all(item.entropy is not None for _, _, item in rows) else None),
        "advantage": np.asarray(r.advantages, dtype=np.float64),
        "length": lengths,
        "reward": r.rewards[~np.isnan(r.rewards)],
    }
    left_out = {}
    for name, x in values.items():
        if x is not None:
            finite = np.isfinite(x)
            left_out[name] = int((~finite).sum())
            values[name] = x[finite]
    tied, start = [], 0
    for group in record.groups:
        part = r.rewards[start:start + len(group.completions)]
        start += len(group.completions)
        part = part[~np.isnan(part)]
        tied += [part.size == 0 or bool(np.all(part == part[0]))] * len(group.completions)
    token_ids = np.concatenate([item.token_ids[m] for item, m in trained]).astype(np.int64)
    text = _first_texts(token_ids, trained)
    return StepArrays(
        step=step, values=values, left_out=left_out, prompts=tuple(record.groups[gi].prompt for gi, _, _ in rows),
        rewards=r.rewards, lengths=lengths, tied=np.asarray(tied, dtype=bool),
        token_ids=token_ids,
        token_logp=np.concatenate([np.asarray(item.logprobs, dtype=np.float64)[m] for item, m in trained]),
        token_text=text)


def _first_texts(token_ids: np.ndarray, trained: list) -> dict[int, str]:
    """Each trained id's text where it first occurs; found through numpy (a step holds up to 2M tokens, a
    Python loop over them all would take seconds)."""
    ids, first = np.unique(token_ids, return_index=True)
    where = [np.flatnonzero(m) for _, m in trained]  # each completion's trained positions
    starts = np.cumsum([0] + [w.size for w in where])
    rows = np.searchsorted(starts, first, side="right") - 1
    return {int(i): trained[r][0].tokens[int(where[r][k - starts[r]])]
            for i, k, r in zip(ids.tolist(), first.tolist(), rows.tolist(), strict=True)}


@dataclass(frozen=True)
class PromptChange:
    prompt: str
    a: float  # NaN: no completion of this prompt was scored at that step
    b: float
    change: float  # b − a


@dataclass(frozen=True)
class PromptMatch:
    matched: int  # prompts (by their text) present at both steps
    only_a: int
    only_b: int
    # one row per matched prompt, the largest |change| first (a change that is not a number last)
    reward: tuple[PromptChange, ...]  # mean reward of its completions
    length: tuple[PromptChange, ...]  # mean trained tokens of its completions
    tied: tuple[PromptChange, ...]  # share of its completions in a tied group


@dataclass(frozen=True)
class TokenChange:
    token_id: int
    text: str
    count_a: int
    count_b: int
    mean_a: float  # mean recorded log π_θ of its trained occurrences at step a
    mean_b: float
    change: float  # b − a: > 0, the policy came to favour it


@dataclass(frozen=True)
class TokenShift:
    compared: int  # token ids occurring ≥ MIN_TOKEN_COUNT times in both steps
    rises: tuple[TokenChange, ...]  # change > 0, largest first
    falls: tuple[TokenChange, ...]  # change < 0, most negative first


@dataclass(frozen=True)
class RunDiff:
    a: int  # the two steps
    b: int
    quantities: dict[str, TwoSamples]  # QUANTITIES' names
    left_out: dict[str, tuple[int, int]]  # non-finite values dropped at each step
    prompts: PromptMatch
    tokens: TokenShift


def _per_prompt(s: StepArrays) -> dict[str, tuple[float, float, float]]:
    """prompt -> (mean reward over its scored completions, mean length, share in a tied group)."""
    rows: dict[str, list[int]] = {}
    for k, prompt in enumerate(s.prompts):
        rows.setdefault(prompt, []).append(k)
    out = {}
    for prompt, ks in rows.items():
        rewards = s.rewards[ks]
        rewards = rewards[~np.isnan(rewards)]
        out[prompt] = (float(rewards.mean()) if rewards.size else math.nan, float(s.lengths[ks].mean()),
                       float(s.tied[ks].mean()))
    return out


def _by_change(rows: list[PromptChange]) -> tuple[PromptChange, ...]:
    return tuple(sorted(rows, key=lambda r: (math.isnan(r.change), -abs(r.change) if not math.isnan(r.change)
                                              else 0.0, r.prompt)))


def match_prompts(a: StepArrays, b: StepArrays) -> PromptMatch:
    pa, pb = _per_prompt(a), _per_prompt(b)
    both = [p for p in pa if p in pb]
    tables = []
    for i in range(3):
        tables.append(_by_change([PromptChange(p, pa[p][i], pb[p][i], pb[p][i] - pa[p][i]) for p in both]))
    return PromptMatch(len(both), len(pa) - len(both), len(pb) - len(both), *tables)


def token_shift(a: StepArrays, b: StepArrays) -> TokenShift:
    def means(s: StepArrays) -> dict[int, tuple[int, float]]:
        ids, inverse, counts = np.unique(s.token_ids, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=s.token_logp, minlength=ids.size)
        return {int(i): (int(n), float(t / n)) for i, n, t in zip(ids, counts, sums, strict=True)
                if n >= MIN_TOKEN_COUNT}

    ma, mb = means(a), means(b)
    rows = [TokenChange(t, b.token_text.get(t, a.token_text.get(t, "")), ma[t][0], mb[t][0], ma[t][1], mb[t][1],
                        mb[t][1] - ma[t][1]) for t in sorted(ma.keys() & mb.keys())]
    rises = sorted((r for r in rows if r.change > 0), key=lambda r: (-r.change, r.token_id))
    falls = sorted((r for r in rows if r.change < 0), key=lambda r: (r.change, r.token_id))
    return TokenShift(len(rows), tuple(rises), tuple(falls))


def diff_arrays(a: StepArrays, b: StepArrays) -> RunDiff:
    return RunDiff(a.step, b.step, {name: two_samples(a.values[name], b.values[name]) for name, _ in QUANTITIES},
                   {name: (a.left_out.get(name, 0), b.left_out.get(name, 0)) for name, _ in QUANTITIES},
                   match_prompts(a, b), token_shift(a, b))


def diff_steps(a: tuple[int, str, StepRecord], b: tuple[int, str, StepRecord]) -> RunDiff:
    """Each side: (its step in the run, its record's catalog id, the record). The last few diffs are kept (by the
    steps and the records' ids): the page and its JSON twin, or a reload, do not sort a 2M-token step again."""
    key = (a[0], a[1], b[0], b[1])
    with _lock:
        if key in _diffs:
            _diffs.move_to_end(key)
            return _diffs[key]
    diff = diff_arrays(step_arrays(*a), step_arrays(*b))
    with _lock:
        _diffs[key] = diff
        while len(_diffs) > KEEP:
            _diffs.popitem(last=False)
    return diff


__all__ = ["MIN_TOKEN_COUNT", "QUANTITIES", "PromptChange", "PromptMatch", "RunDiff", "StepArrays", "TokenChange",
           "TokenShift", "diff_arrays", "diff_steps", "match_prompts", "step_arrays", "token_shift"]
