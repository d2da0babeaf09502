"""What a run's per-token numbers say (issue 34), as findings beside the logged metrics' (run_findings.py).

Rules over the `tokens/…` metrics token_stats.py derives from prime-rl's and slime's per-token files; each is
silent where the run has none, and each is tested on a run built to trigger it and one built not to
(tests/runs/test_token_findings.py):

- mismatch_band: `tokens/outside_is_band` ≥ BAND_SHARE (1 %) at some step: that share of the trained tokens had
  π_trainer/π_rollout outside [1/C, C] (C = 2): a truncated or masked IS correction acts on them, and without one
  their gradient is off-policy by that factor. Said with the worst step, its p99 |Δ log p| and how many steps
  crossed.
- mask_blind: at some step the mismatch KL over every token (masked ones too) is ≥ BLIND_FACTOR (10) × the
  trained tokens' and ≥ BLIND_FLOOR (0.01): a dashboard that does not apply the loss mask reports a mismatch
  that is not there (masked tokens carry no rollout log-prob).
- low_signal: `tokens/carry_gradient` < SIGNAL_SHARE (50 %) at some step: said with where the rest went
  (advantage 0: tied groups; the framework's IS mask).
- ties_uncounted: `tokens/zero_advantage` > 0 at a step with no count of tied groups (no `frac_reward_zero_std`,
  no `samples/tied_group_share`): prime-rl's token export has no group ids and no rewards, slime's train dumps no
  group ids, so whether those tokens are tied groups' cannot be told; the finding says so plainly rather than say
  nothing. Where the groups are counted (TRL's log, verl's and slime's rollout dumps) run_findings.tied_groups speaks.
- gradient_masked: an IS mask at [1/C, C] (token- or sequence-level, engine/is_effect.py) would zero the tokens that
  hold ≥ DROP_SHARE (10 %) of the uncorrected gradient's mass at some step: said with the worst step and level, the
  other level's share there, and what the masked gradient's norm and direction become.
"""
from __future__ import annotations

import math

from app.runs.domain.finding import TIED_NAMES, Finding, num, pct
from app.runs.domain.run_log import RunLog
from app.runs.domain.token_stats import IS_GRAD_METRIC, IS_THRESHOLD

BAND_SHARE = 0.01
BLIND_FACTOR, BLIND_FLOOR = 10.0, 0.01
SIGNAL_SHARE = 0.5
DROP_SHARE = 0.1
MASKS = {"token_mask": "token-level", "sequence_mask": "sequence-level"}


def _at(log: RunLog, name: str) -> dict[int, float]:
    return {s: v for s, v in log.series(name) if math.isfinite(v)} if name in log.metrics else {}


def mismatch_band(log: RunLog) -> list[Finding]:
    share = _at(log, "tokens/outside_is_band")
    over = {s: v for s, v in share.items() if v >= BAND_SHARE}
    if not over:
        return []
    step = max(over, key=lambda s: over[s])
    p99 = _at(log, "tokens/mismatch_abs_p99").get(step)
    tail = f"; the 99th percentile of |log π_trainer − log π_rollout| there was {num(p99)} nats" if p99 else ""
    return [Finding("mismatch_band", (
        f"At step {step}, {pct(over[step])} of the trained tokens had a train/inference ratio π_trainer/π_rollout "
        f"outside [{1 / IS_THRESHOLD:g}, {IS_THRESHOLD:g}] (masked tokens excluded){tail}. A truncated or masked "
        f"importance-sampling correction acts on those tokens; without one their gradient is off-policy by that "
        f"factor. {len(over)} of {len(share)} steps had at least {pct(BAND_SHARE)} outside."), (step,),
        {"worst_step": step, "worst_share": over[step], "steps_over": len(over)},
        tuple(n for n in ("tokens/outside_is_band", "tokens/mismatch_abs_p99") if n in log.metrics))]


def mask_blind(log: RunLog) -> list[Finding]:
    aware, blind = _at(log, "tokens/mismatch_kl"), _at(log, "tokens/mismatch_kl_mask_blind")
    worst: tuple[float, int] | None = None
    for step, b in blind.items():
        a = aware.get(step)
        if a is not None and b >= BLIND_FLOOR and b >= BLIND_FACTOR * a:
            times = b / a if a > 0 else math.inf
            if worst is None or times > worst[0]:
                worst = (times, step)
    if worst is None:
        return []
    step = worst[1]
    factor = f"{worst[0]:.0f} ×" if math.isfinite(worst[0]) else "far above"
    return [Finding("mask_blind", (
        f"Counting every token, masked ones too, the train/inference mismatch KL at step {step} would read "
        f"{num(blind[step])} nats, {factor} the {num(aware[step])} of the trained tokens alone: the masked "
        "(prompt, tool) tokens carry no rollout log-prob, so a view that ignores the loss mask shows a mismatch "
        "that is not there. The charts here count trained tokens only."), (step,),
        {"step": step, "mask_blind": blind[step], "mask_aware": aware[step]},
        ("tokens/mismatch_kl", "tokens/mismatch_kl_mask_blind"))]


def low_signal(log: RunLog) -> list[Finding]:
    carry = _at(log, "tokens/carry_gradient")
    under = {s: v for s, v in carry.items() if v < SIGNAL_SHARE}
    if not under:
        return []
    step = min(under, key=lambda s: under[s])
    zero, masked = _at(log, "tokens/zero_advantage").get(step), _at(log, "tokens/is_masked").get(step)
    where = [f"{pct(zero)} had advantage 0 (their group's rewards were all equal)"] if zero else []
    if masked:
        where.append(f"{pct(masked)} were dropped by the trainer's importance-sampling mask")
    return [Finding("low_signal", (
        f"At step {step} only {pct(under[step])} of the trained tokens carried gradient"
        + (f": {' and '.join(where)}." if where else ".")
        + f" {len(under)} of {len(carry)} steps were under {pct(SIGNAL_SHARE)}."), (step,),
        {"worst_step": step, "worst_share": under[step], "steps_under": len(under)},
        tuple(n for n in ("tokens/carry_gradient", "tokens/zero_advantage", "tokens/is_masked") if n in log.metrics))]


def ties_uncounted(log: RunLog) -> list[Finding]:
    zero = _at(log, "tokens/zero_advantage")
    counted = {s for name in TIED_NAMES for s in _at(log, name)}
    blind = {s: v for s, v in zero.items() if v > 0 and s not in counted}
    if not blind:
        return []
    step = max(blind, key=lambda s: (blind[s], -s))
    return [Finding("ties_uncounted", (
        f"At step {step}, {pct(blind[step])} of the trained tokens carry advantage 0; this run's files have no "
        "group ids (prime-rl's token export has none, nor rewards; slime's train dumps have none, its rollout_data/ "
        "dumps have them), so tied groups cannot be counted: those tokens are a tied group's (every reward equal) "
        "or a response's that scored exactly its group's mean. "
        f"{len(blind)} of {len(zero)} steps had trained tokens with advantage 0 and no count of tied groups."),
        (step,), {"worst_step": step, "worst_share": blind[step], "steps": len(blind)}, ("tokens/zero_advantage",))]


def gradient_masked(log: RunLog) -> list[Finding]:
    dropped = {mode: _at(log, IS_GRAD_METRIC.format(mode=mode, stat="dropped_share")) for mode in MASKS}
    over = [(v, s, mode) for mode, shares in dropped.items() for s, v in shares.items() if v >= DROP_SHARE]
    if not over:
        return []
    share, step, mode = max(over, key=lambda x: (x[0], -x[1]))
    other = next(m for m in MASKS if m != mode)
    beside = dropped[other].get(step)
    tail = f"; the {MASKS[other]} mask {pct(beside)}" if beside is not None else ""
    norm = _at(log, IS_GRAD_METRIC.format(mode=mode, stat="norm_ratio")).get(step)
    cosine = _at(log, IS_GRAD_METRIC.format(mode=mode, stat="cosine")).get(step)
    became = ""
    if norm == 0:
        became = " Nothing of the step's gradient would be left."
    elif norm is not None:
        became = f" What it keeps would be {num(norm)} × as long as the uncorrected gradient" + (
            f", at cosine {num(cosine)} to it." if cosine is not None else ".")
    steps_over = len({s for _, s, _ in over})
    level = ("each token on its own ratio" if mode == "token_mask"
             else "a whole sequence on the product of its token ratios, TRL's sequence_mask")
    names = tuple(IS_GRAD_METRIC.format(mode=m, stat=stat) for m in MASKS
                  for stat in ("dropped_share", "norm_ratio", "cosine"))
    return [Finding("gradient_masked", (
        f"At step {step}, a {MASKS[mode]} importance-sampling mask at [{1 / IS_THRESHOLD:g}, {IS_THRESHOLD:g}] "
        f"({level}) would drop {pct(share)} of the uncorrected gradient (its Σ|∂loss/∂log π| over trained "
        f"tokens, recomputed){tail}.{became} {steps_over} of "
        f"{len(set().union(*dropped.values()))} steps had a mask drop at least {pct(DROP_SHARE)}."), (step,),
        {"worst_step": step, "worst_share": share, "steps_over": steps_over},
        tuple(n for n in names if n in log.metrics))]


TOKEN_RULES = (mismatch_band, mask_blind, low_signal, ties_uncounted, gradient_masked)

__all__ = ["BAND_SHARE", "BLIND_FACTOR", "BLIND_FLOOR", "DROP_SHARE", "SIGNAL_SHARE", "TOKEN_RULES"]
