"""What a run's logged metrics say, as sentences with their numbers and the steps they point at (issue 34).

The questions practitioners ask most of a GRPO run (TRL #2703, #3120, #3857; verl #514, #2996; OpenRLHF
#931: loss 0, clip ratio 0, every reward equal, truncation, KL spikes, entropy collapse) as rules over
TRL's logged names (run_log.py). Each rule reads only metrics the log has (a rule whose metric is absent
says nothing), and each is tested on a run built to trigger it and one built not to
(tests/runs/test_run_findings.py). The thresholds are here, named, and said in the sentence:

- clip_never: `clip_ratio/region_mean` (else low_mean + high_mean) is 0 at every logged step. With TRL's
  default num_iterations = 1 the policy that sampled is the one updated, so ρ = 1 and nothing can clip:
  expected. With num_iterations > 1 the updates are too small to move ρ past 1 ± ε. The log does not
  say which (num_iterations lives in training_args.bin, a pickle this app never opens): both are said.
- tied_groups: `frac_reward_zero_std` ≥ TIED_SHARE (0.5) at some step: that share of the groups had
  every reward equal, so their advantages are 0 and they give no gradient. Said with the worst step
  and how many steps crossed the line. With no `frac_reward_zero_std` (verl logs to W&B), the share
  its rollout dumps give (`samples/tied_group_share`, domain/verl_rollouts.py) is read instead.
- loss_zero: `loss` exactly 0 at ≥ 1 step. Alone that is no bug (TRL #2703, #3452): at num_iterations = 1 the
  loss's value is minus a weighted mean of the advantages (near 0: centred per group) plus β·KL while its
  gradient is not, and
  transformers' Trainer logs the loss rounded to 4 decimals. Where frac_reward_zero_std is 1 as well,
  every group tied: the gradient is 0 too (TRL #3857: loss 0, grad_norm 0, frac_reward_zero_std 1). The
  sentence says which, and at how many of them grad_norm is 0.
- truncated: `completions/clipped_ratio` ≥ TRUNCATED_SHARE (0.2) at some step: that share of the
  completions hit max_completion_length; their last tokens carry no EOS.
- kl_spike: `kl` at a step exceeds SPIKE_FACTOR (5) × the median of the SPIKE_WINDOW (10) logged steps
  before it, and exceeds SPIKE_FLOOR (1e-3) (a median of ~0 at the start would make every step a spike).
- entropy_fall: `entropy` falls by ≥ FALL_SHARE (50 %) from its running maximum to a later value; said
  with the two steps that bound the largest such fall.
- not_finite: any metric NaN or ±inf at some step: the first such step of each metric.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from app.runs.domain.finding import TIED_NAMES, Finding, num, pct
from app.runs.domain.run_log import RunLog
from app.runs.domain.token_findings import TOKEN_RULES

TIED_SHARE = 0.5
TRUNCATED_SHARE = 0.2
SPIKE_FACTOR, SPIKE_WINDOW, SPIKE_FLOOR = 5.0, 10, 1e-3
FALL_SHARE = 0.5
CLIP_NAMES = ("clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_fraction")


def _clip_series(log: RunLog) -> tuple[str, list[tuple[int, float]]] | None:
    if "clip_ratio/region_mean" in log.metrics:
        return "clip_ratio/region_mean", list(log.series("clip_ratio/region_mean"))
    if "clip_ratio/low_mean" in log.metrics and "clip_ratio/high_mean" in log.metrics:
        low, high = dict(log.series("clip_ratio/low_mean")), dict(log.series("clip_ratio/high_mean"))
        return "clip_ratio/low_mean + high_mean", [(s, low[s] + high[s]) for s in low if s in high]
    if "clip_fraction" in log.metrics:  # UNIPO's canonical files' name
        return "clip_fraction", list(log.series("clip_fraction"))
    return None


def clip_never(log: RunLog) -> list[Finding]:
    found = _clip_series(log)
    if found is None:
        return []
    name, points = found
    if not points or any(v != 0 for _, v in points):
        return []
    return [Finding("clip_never", (
        f"The clip ratio ({name}) is 0 at every one of the {len(points)} logged steps. With TRL's default "
        "num_iterations = 1 that is expected, not a bug: the policy that sampled is the one updated, so ρ = 1 "
        "and nothing can clip. With num_iterations > 1 it means the updates are too small to move ρ past 1 ± ε "
        "(this log does not record num_iterations)."), (points[0][0], points[-1][0]), {"steps": len(points)},
        tuple(n for n in CLIP_NAMES if n in log.metrics))]




def tied_groups(log: RunLog) -> list[Finding]:
    name = next((n for n in TIED_NAMES if n in log.metrics), None)
    if name is None:
        return []
    points = [(s, v) for s, v in log.series(name) if math.isfinite(v)]
    over = [(s, v) for s, v in points if v >= TIED_SHARE]
    if not over:
        return []
    worst = max(over, key=lambda p: p[1])
    return [Finding("tied_groups", (
        f"At step {worst[0]}, {pct(worst[1])} of the groups had every reward equal ({name}): "
        f"their advantages are 0 and they give no gradient. {len(over)} of {len(points)} "
        f"{'logged ' if name == TIED_NAMES[0] else ''}steps had at "
        f"least {pct(TIED_SHARE)} of their groups tied."), (worst[0],),
        {"worst_step": worst[0], "worst_share": worst[1], "steps_over": len(over)}, (name,))]


def loss_zero(log: RunLog) -> list[Finding]:
    if "loss" not in log.metrics:
        return []
    zero = [s for s, v in log.series("loss") if v == 0]
    if not zero:
        return []
    tied = dict(log.series("frac_reward_zero_std")) if "frac_reward_zero_std" in log.metrics else {}
    known = [s for s in zero if s in tied]
    all_tied = [s for s in known if tied[s] == 1.0]
    if not known:
        why = " Whether every group was tied there is not logged (no frac_reward_zero_std)."
    elif all_tied:
        why = (f" At {len(all_tied)} of them every group was tied (frac_reward_zero_std 1, first at step "
               f"{all_tied[0]}): there the advantages, and with β = 0 the gradient, are 0 too: those steps taught "
               "nothing.")
    else:
        why = " At none of them was every group tied (frac_reward_zero_std < 1), so the gradient was not 0."
    grads = dict(log.series("grad_norm")) if "grad_norm" in log.metrics else {}
    still = [s for s in zero if s in grads and grads[s] == 0]
    if still:
        why += f" grad_norm is 0 at {len(still)} of them (first at step {still[0]}): no update at all there."
    plural = "s" if len(zero) != 1 else ""
    return [Finding("loss_zero", (
        f"The logged loss is 0 at {len(zero)} step{plural}, first at step {zero[0]}. That alone is no bug: at "
        "num_iterations = 1 the GRPO loss's value is minus a weighted mean of the advantages (near 0: they are "
        "centred in each group) plus β·KL, while its gradient is not 0, and transformers' Trainer logs the loss "
        "rounded to 4 decimals." + why),
        ((all_tied or still or zero)[0],),
        {"steps": len(zero), "first": zero[0], "all_tied": len(all_tied), "zero_grad": len(still)},
        tuple(n for n in ("loss", "frac_reward_zero_std", "grad_norm") if n in log.metrics))]


def truncated(log: RunLog) -> list[Finding]:
    if "completions/clipped_ratio" not in log.metrics:
        return []
    over = [(s, v) for s, v in log.series("completions/clipped_ratio") if math.isfinite(v) and v >= TRUNCATED_SHARE]
    if not over:
        return []
    worst = max(over, key=lambda p: p[1])
    return [Finding("truncated", (
        f"At step {worst[0]}, {pct(worst[1])} of the completions hit max_completion_length "
        f"(completions/clipped_ratio): cut before their end-of-sequence token. {len(over)} logged steps had at "
        f"least {pct(TRUNCATED_SHARE)}."), (worst[0],), {"worst_step": worst[0], "worst_share": worst[1]},
        ("completions/clipped_ratio",))]


def kl_spike(log: RunLog) -> list[Finding]:
    if "kl" not in log.metrics:
        return []
    points = [(s, v) for s, v in log.series("kl") if math.isfinite(v)]
    spikes: list[tuple[int, float, float]] = []  # (step, kl, median before), consecutive spiking steps as one: its peak
    previous = False
    for i in range(SPIKE_WINDOW, len(points)):
        step, value = points[i]
        median = statistics.median(v for _, v in points[i - SPIKE_WINDOW:i])
        spiking = value > SPIKE_FLOOR and value > SPIKE_FACTOR * median
        if spiking and previous and value > spikes[-1][1]:
            spikes[-1] = (step, value, spikes[-1][2])  # the same spike, higher: its first step's median stands
        elif spiking and not previous:
            spikes.append((step, value, median))
        previous = spiking
    out = []
    for step, value, median in spikes:
        times = f"{value / median:.1f} ×" if median > 0 else "far above"
        out.append(Finding("kl_spike", (
            f"KL spiked at step {step}: {num(value)}, {times} the median of the {SPIKE_WINDOW} logged steps before "
            f"the spike ({num(median)})."), (step,), {"step": step, "kl": value, "median_before": median},
            ("kl",)))
    return out


def entropy_fall(log: RunLog) -> list[Finding]:
    if "entropy" not in log.metrics:
        return []
    points = [(s, v) for s, v in log.series("entropy") if math.isfinite(v)]
    best: tuple[float, int, float, int, float] | None = None  # (share, from step, from value, to step, to value)
    peak: tuple[int, float] | None = None
    for step, value in points:
        if peak is None or value >= peak[1]:  # the latest step at the running maximum: where the fall starts
            peak = (step, value)
            continue
        if peak[1] > 0:
            share = (peak[1] - value) / peak[1]
            if best is None or share > best[0]:
                best = (share, peak[0], peak[1], step, value)
    if best is None or best[0] < FALL_SHARE:
        return []
    share, a, va, b, vb = best
    return [Finding("entropy_fall", (
        f"Entropy fell {pct(share)} between steps {a} and {b} ({num(va)} → {num(vb)}): the policy grew sure of "
        "its tokens; a collapse this large often comes before rewards stop improving."), (a, b),
        {"from_step": a, "to_step": b, "share": share}, ("entropy",))]


def not_finite(log: RunLog) -> list[Finding]:
    out = []
    for name in log.names:
        bad = [(s, v) for s, v in log.series(name) if not math.isfinite(v)]
        if bad:
            step, value = bad[0]
            out.append(Finding("not_finite", (
                f"{name} is {value} at step {step}" + (f" and at {len(bad) - 1} logged steps after it." if len(bad) > 1
                                                       else ".")), (step,), {"step": step, "count": len(bad)},
                (name,)))
    return out


RULES: tuple[Callable[[RunLog], list[Finding]], ...] = (
    not_finite, loss_zero, tied_groups, clip_never, truncated, kl_spike, entropy_fall)


def findings(log: RunLog) -> list[Finding]:
    """Every rule's findings, in RULES' order (the ones that stop training first), then the per-token rules'."""
    # once per log (the explorer, its JSON and a compare all ask again per request: ~20 ms at 10,000 steps);
    # a copy of the list, so a caller's changes never reach the next one's
    return list(log.memo("findings", lambda: tuple(f for rule in (*RULES, *TOKEN_RULES) for f in rule(log))))


__all__ = ["FALL_SHARE", "RULES", "SPIKE_FACTOR", "SPIKE_FLOOR", "SPIKE_WINDOW", "TIED_SHARE", "TRUNCATED_SHARE",
           "Finding", "findings"]
