"""What a practitioner asks of a step ("loss is 0, is it training?", "clip ratio is always 0",
"every group has zero reward variance"), answered in one sentence each, with its numbers and a
link to where the page shows it. Reads the engine's recomputation; computes only summaries.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.step import Recomputed
from app.views.numbers import ratio, readout
from app.views.tokens.metrics import visible

# url(step id, group, completion, token position) -> a link into the page
Link = Callable[[str, int, int, int], str]


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    sentence: str
    url: str
    alert: bool = False  # a sign the step may not be training as meant


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def loss_near_zero(record: StepRecord, r: Recomputed, link: Link) -> Finding:
    rho = np.concatenate([c.ratio[c.mask > 0] for c in r.completions])
    off = float(np.abs(rho - 1).max()) if rho.size else 0.0
    means = [float(np.mean(r.advantages[[k for k, c in enumerate(r.completions) if c.group == g]]))
             for g in range(len(record.groups))]
    centred = max(abs(m) for m in means)
    # "about 0": under 1% of what its terms add up to without cancelling
    small = abs(r.loss) <= 0.01 * r.scale if r.scale > 0 else True
    if small:
        why = (f"the loss is {readout(r.loss)}, about 0 against the size of its terms (Σ|w·term| = "
               f"{readout(r.scale)}): ")
        why += ("every ratio is 1 (the policy has not moved since sampling: max |ρ − 1| = "
                f"{readout(off)}) and " if off < 1e-6 else "")
        why += (f"each group's advantages are centred (largest group mean {readout(centred)}), so the terms "
                "cancel. The gradient does not: ")
    else:
        why = f"the loss is {readout(r.loss)}; "
    why += f"‖∂loss/∂log π‖ = {readout(r.grad_norm)} over {record.token_count:,} tokens."
    title = "A loss of about 0 still trains" if small else "The loss"
    return Finding("loss-zero", title, why[0].upper() + why[1:], link("loss", 0, 0, 0))


def zero_variance(record: StepRecord, r: Recomputed, link: Link) -> Finding:
    flat = []
    start = 0
    for g, group in enumerate(record.groups):
        rewards = r.rewards[start:start + len(group.completions)]
        start += len(group.completions)
        scored = rewards[~np.isnan(rewards)]
        if scored.size == 0 or np.allclose(scored, scored[0]):
            flat.append(g)
    n = len(record.groups)
    if not flat:
        every = "the one group has" if n == 1 else f"all {n} groups have"
        return Finding("zero-variance", "Groups with no signal", f"No group has zero reward variance: {every} "
                       "completions that scored differently, so every group teaches something.",
                       link("group", 0, 0, 0))
    return Finding("zero-variance", "Groups with no signal",
                   f"{len(flat)} of {n} groups ({_pct(len(flat) / n)}) got the same reward for every completion: "
                   "their advantages are 0, so they add nothing to the gradient (TRL logs this as "
                   f"frac_reward_zero_std). First: group {flat[0]}.", link("group", flat[0], 0, 0),
                   alert=len(flat) == n)


def truncated(record: StepRecord, r: Recomputed, link: Link) -> Finding:
    items = record.completions()
    cut = [(g, i) for g, i, c in items if c.truncated]
    n = len(items)
    limit = record.config.max_length
    if not cut:
        return Finding("truncated", "Completions cut short", f"No completion was cut at the length limit "
                       f"({limit} tokens): every one of the {n} ended on its own.", link("group", 0, 0, 0))
    return Finding("truncated", "Completions cut short",
                   f"{len(cut)} of {n} completions ({_pct(len(cut) / n)}) were cut at max_length = {limit} before "
                   "they ended: their reward judges an unfinished answer.", link("group", cut[0][0], cut[0][1], 0),
                   alert=len(cut) / n > 0.2)


def clipping(record: StepRecord, r: Recomputed, link: Link) -> Finding:
    c = r.conventions
    if c.policy_loss == "cispo":
        share = r.metrics.get("cispo_clip_ratio", 0.0)
        return Finding("clip", "Clip fractions", f"CISPO caps the ratio's weight at ε_high = {c.clip_epsilon_high:g}"
                       f" for {_pct(share)} of tokens (A > 0).", link("ratio", 0, 0, 0))
    low, high = r.metrics["clip_ratio/low_mean"], r.metrics["clip_ratio/high_mean"]
    band = f"[{1 - c.clip_epsilon:g}, {1 + c.clip_epsilon_high:g}]"
    if low == 0 and high == 0:
        sentence = (f"No token's clip binds (low 0%, high 0%): every ratio with a push stayed inside {band}. "
                    "At the first pass over a freshly sampled batch ρ = 1 exactly, so a clip ratio of 0 is "
                    "expected unless the batch is reused (num_iterations > 1, or steps_per_generation > 1).")
    else:
        sentence = (f"The clip binds for {_pct(low)} of tokens below the band (A < 0, ρ < {1 - c.clip_epsilon:g}) "
                    f"and {_pct(high)} above it (A > 0, ρ > {1 + c.clip_epsilon_high:g}): those tokens get no push "
                    "from the surrogate.")
    first = next(((x.group, x.index, int(np.flatnonzero(x.clip_low | x.clip_high)[0]))
                  for x in r.completions if (x.clip_low | x.clip_high).any()), (0, 0, 0))
    return Finding("clip", "Clip fractions", sentence, link("ratio", *first))


def rollout_gap(record: StepRecord, r: Recomputed, link: Link) -> Finding | None:
    items = record.completions()
    if not all(c.sampling_logprobs is not None for _, _, c in items):
        return None
    # TRL's importance-sampling ratio: π_old/π_rollout per token (the trainer's old log-probs)
    diffs = [(c.logprobs if c.old_logprobs is None else c.old_logprobs) - c.sampling_logprobs for _, _, c in items]
    gaps = [np.abs(d) for d in diffs]
    flat = np.concatenate(gaps)
    worst = max(range(len(gaps)), key=lambda k: gaps[k].max())
    is_ratio = np.exp(np.concatenate(diffs))
    sentence = (f"The rollout engine and the trainer disagree on log π by {readout(float(flat.mean()))} on average "
                f"and at most {readout(float(flat.max()))} (completion {items[worst][1]} of group {items[worst][0]}); "
                f"the importance-sampling ratio π_old/π_rollout ranges over [{ratio(float(is_ratio.min()))}, "
                f"{ratio(float(is_ratio.max()))}]. Correction in force: {r.conventions.is_correction}.")
    pos = int(gaps[worst].argmax())
    return Finding("rollout", "Rollout against trainer", sentence, link("ratio", items[worst][0], items[worst][1], pos),
                   alert=float(flat.max()) > 1.0)


def largest_kl(record: StepRecord, r: Recomputed, link: Link, tokens: list[list[str]], top: int = 5) -> Finding:
    if r.conventions.beta == 0:
        return Finding("kl", "Largest KL", "β = 0: this run has no KL penalty, so the reference does not enter the "
                       "loss.", link("kl", 0, 0, 0))
    found = []
    for k, c in enumerate(r.completions):
        on = np.flatnonzero(c.mask > 0)
        if on.size:
            best = on[np.argsort(-c.kl[on])[:top]]
            found += [(float(c.kl[t]), k, int(t)) for t in best]
    found.sort(reverse=True)
    words = ", ".join(f"“{visible(tokens[k][t])}” ({readout(v)}, completion {r.completions[k].index} of group "
                      f"{r.completions[k].group}, token {t + 1})" for v, k, t in found[:top])
    v, k, t = found[0] if found else (0.0, 0, 0)
    return Finding("kl", "Largest KL", f"The tokens furthest from the reference: {words}. Mean KL per token "
                   f"{readout(r.metrics.get('kl', 0.0))}.", link("kl", r.completions[k].group,
                                                                r.completions[k].index, t))


def entropy(record: StepRecord, r: Recomputed, link: Link) -> Finding | None:
    if "entropy" not in r.metrics:
        return None
    values = np.concatenate([c.entropy for _, _, c in record.completions() if c.entropy is not None])
    low = float((values < 0.1).mean())
    return Finding("entropy", "Entropy", f"Mean entropy {readout(r.metrics['entropy'])} nats per token (from "
                   f"{readout(float(values.min()))} to {readout(float(values.max()))}); {_pct(low)} of tokens are "
                   "near-certain (H < 0.1): a policy collapsing toward one answer shows here first.",
                   link("group", 0, 0, 0), alert=low > 0.9)


def length_reward(record: StepRecord, r: Recomputed, link: Link) -> Finding:
    """Within each group (what GRPO compares: A is a completion's reward against its group's), how
    length goes with reward: Pearson r of the group-centred lengths and rewards, and the mean length
    of the completions above their group's mean reward against those below it. Both are computed over
    the same completions and the same centring, so the sentence says when their signs disagree."""
    lengths = np.asarray([c.length for _, _, c in record.completions()], dtype=float)
    rewards = r.rewards.copy()
    groups = np.asarray([g for g, _, _ in record.completions()])
    keep = ~np.isnan(rewards)
    dl, dr = np.zeros_like(lengths), np.zeros_like(rewards)
    for g in np.unique(groups):
        rows = (groups == g) & keep
        if rows.sum() > 1:
            dl[rows], dr[rows] = lengths[rows] - lengths[rows].mean(), rewards[rows] - rewards[rows].mean()
    used = keep & np.isin(groups, [g for g in np.unique(groups) if ((groups == g) & keep).sum() > 1])
    n, k = int(used.sum()), len(np.unique(groups[used]))
    what = (f"Within each group (a completion's length and reward against its group's means, {n} completions in "
            f"{k} group{'s' if k != 1 else ''})")
    if not (dl[used] ** 2).sum() or not (dr[used] ** 2).sum():
        return Finding("length", "Length against reward", f"{what}, length and reward cannot be correlated: every "
                       "group's lengths or rewards are all equal.", link("group", 0, 0, 0))
    corr = float((dl[used] * dr[used]).sum() / np.sqrt((dl[used] ** 2).sum() * (dr[used] ** 2).sum()))
    sentence = f"{what}, the Pearson r between length (tokens) and reward is {corr:+.2f}".replace("-", "−")
    tie = 1e-12 * max(1.0, float(np.abs(rewards[keep]).max()))  # a reward at its group's mean, up to rounding
    above, below = used & (dr > tie), used & (dr < -tie)
    if above.any() and below.any():
        a, b = float(lengths[above].mean()), float(lengths[below].mean())
        sentence += (f": completions above their group's mean reward average {readout(a)} tokens, those below "
                     f"{readout(b)}")
        if np.sign(a - b) != np.sign(corr) and a != b:
            sentence += (" (the two point opposite ways: r weighs each completion by how far its reward is from "
                         "its group's mean, the split does not, so length and reward have no steady direction here)")
        else:
            sentence += (": longer completions earn more" if corr > 0 else ": shorter completions earn more") \
                if abs(corr) >= 0.1 else ": no clear direction (|r| < 0.1)"
    return Finding("length", "Length against reward", sentence + ".", link("group", 0, 0, 0))


def diagnostics(record: StepRecord, r: Recomputed, link: Link, tokens: list[list[str]]) -> list[Finding]:
    found = [loss_near_zero(record, r, link), zero_variance(record, r, link), truncated(record, r, link),
             clipping(record, r, link), rollout_gap(record, r, link), largest_kl(record, r, link, tokens),
             entropy(record, r, link), length_reward(record, r, link)]
    return [f for f in found if f is not None]
