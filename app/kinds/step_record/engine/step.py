"""A recorded GRPO step, recomputed by torch from its recorded log-probabilities.

The recorded log π_θ of every token becomes a float64 leaf; the shared token-level engine
(app/engine/grpo/token_step.py, the one every kind runs) applies the conventions and autograd
gives ∂loss/∂log π per token. Under the record's own conventions the framework's advantages are
used (that is what its loss saw); under another convention ("what if") they are recomputed from
the rewards, per group, as that convention computes them.

Metrics are named and computed as TRL 1.16 logs them (grpo_trainer.py `_compute_loss`,
`global_masked_mean`), so a record's logged values can be checked key by key (checks.py).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from app.engine.grpo import objective as conv
from app.engine.grpo.gradient_parts import gradient_parts
from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import TokenStep, token_grpo_step, token_loss_parts
from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.params import record_conventions


@dataclass(frozen=True)
class CompletionResult:
    """One completion's per-token numbers (its own length; no padding)."""
    group: int
    index: int
    row: int  # its row in the padded batch
    advantage: float
    logp: np.ndarray
    mask: np.ndarray
    ratio: np.ndarray
    surrogate: np.ndarray
    kl: np.ndarray
    per_token: np.ndarray  # the objective term of each token: (L − β·KL)·IS weight
    weight: np.ndarray  # what each token counts for in the loss (aggregation)
    grad: np.ndarray  # ∂loss/∂log π_θ
    grad_surrogate: np.ndarray  # its part from the clipped advantage term (engine/grpo/gradient_parts.py)
    grad_kl: np.ndarray  # its part from the KL penalty, β·∂KL/∂log π (0 with no KL term in the loss)
    is_weight: np.ndarray
    clip_low: np.ndarray
    clip_high: np.ndarray


@dataclass(frozen=True)
class Recomputed:
    conventions: Conventions
    own_conventions: bool  # the record's own (advantages as recorded) or a what-if
    advantages: np.ndarray  # (N,) what the loss used
    advantages_from_rewards: np.ndarray  # (N,) recomputed from the rewards under `conventions`
    rewards: np.ndarray  # (N,) Σ w·r, NaN where no function scored it
    loss: float
    scale: float  # Σ |w·per_token|: the loss's size without cancellation
    grad_norm: float  # ‖∂loss/∂log π‖ over every token
    metrics: dict[str, float]
    completions: list[CompletionResult]
    # per graph node: (value, ∂loss/∂value or None), padded (N, T) or (N,) or a scalar
    nodes: dict[str, tuple[np.ndarray, np.ndarray | None]]


def _padded(rows: list[np.ndarray], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width, dtype=torch.float64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.from_numpy(np.asarray(row, dtype=np.float64))
    return out


def combined_rewards(record: StepRecord) -> np.ndarray:
    """Σ w·r per completion (TRL's nansum); NaN where every function returned None."""
    weights = record.weights
    out = []
    for _, _, c in record.completions():
        values = [c.rewards[name] for name in record.reward_functions]
        scored = [w * v for w, v in zip(weights, values, strict=True) if v is not None]
        out.append(sum(scored) if scored else float("nan"))
    return np.asarray(out, dtype=np.float64)


def group_advantages(record: StepRecord, rewards: np.ndarray, c: Conventions) -> np.ndarray:
    """Each group's advantages as `c` computes them; an unscored completion gets 0 (as TRL does)."""
    out = np.zeros(len(rewards))
    start = 0
    for group in record.groups:
        end = start + len(group.completions)
        r = torch.from_numpy(rewards[start:end].copy())
        scored = ~torch.isnan(r)
        if scored.sum() > 1:  # one completion alone has no baseline but itself: advantage 0
            a = conv.group_advantages(r[scored], c.advantage_std, c.advantage_epsilon)
            out[start:end][scored.numpy()] = a.numpy()
        start = end
    return out


def recompute(record: StepRecord, conventions: Conventions | None = None) -> Recomputed:
    own = conventions is None
    c = record_conventions(record) if conventions is None else conventions
    items = record.completions()
    done = [item for _, _, item in items]
    width = max(item.length for item in done)
    mask = _padded([item.mask_or_ones() for item in done], width)
    logp = _padded([item.logprobs for item in done], width).requires_grad_(True)
    # absent old log-probs: on-policy (TRL's old = logp.detach()); absent reference: no KL to it
    old = _padded([item.logprobs if item.old_logprobs is None else item.old_logprobs for item in done], width)
    ref = _padded([item.logprobs if item.ref_logprobs is None else item.ref_logprobs for item in done], width)
    rollout = [item.sampling_logprobs for item in done]
    sampling = _padded([x for x in rollout if x is not None], width) if all(x is not None for x in rollout) else None
    rewards = combined_rewards(record)
    from_rewards = group_advantages(record, rewards, c)
    recorded = np.asarray([item.advantage for _, _, item in items])
    advantages = recorded if own else from_rewards
    step = token_grpo_step(logp, old, ref, torch.from_numpy(np.nan_to_num(rewards)), mask, c,
                           logp_sampling=sampling, advantages=torch.from_numpy(advantages.copy()))
    reduce = _reduce(step, mask, c, record if own else None)
    loss = _loss(step, mask, record if own else None)
    # the two parts on this very graph, before any tensor retains a .grad (autograd.grad would add to it)
    grad_parts = gradient_parts(token_loss_parts(step, mask, c, reduce), logp)
    for tensor in (step.ratio, step.surrogate, step.kl, step.per_token, step.objective, loss):
        if tensor.requires_grad:
            tensor.retain_grad()
    loss.backward()
    assert logp.grad is not None
    entropy = [item.entropy for _, _, item in items]
    metrics = _metrics(step, mask, c, entropy, width, loss.item(), record.micro_batches())
    metrics.update(summary_metrics(record, rewards, advantages))
    weights = (-step.weights).detach()
    per_token = step.per_token.detach()
    results = [_one(gi, ci, row, item.length, advantages[row], logp, mask, step, weights, per_token, grad_parts)
               for row, (gi, ci, item) in enumerate(items)]
    return Recomputed(c, own, advantages, from_rewards, rewards, loss.item(),
                      float((step.weights * per_token).abs().sum()), float(logp.grad.norm()), metrics, results,
                      _nodes(logp, step, loss, advantages, rewards))


def node_key(node_id: str) -> str:
    """The key in `Recomputed.nodes` of a graph node: a module's one-statement member
    (python@ratio#0) shows its module's tensor."""
    return node_id.removeprefix("python@").split("#")[0] if node_id.startswith("python@") else node_id


def _nodes(logp: torch.Tensor, step: TokenStep, loss: torch.Tensor, advantages: np.ndarray,
           rewards: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Each node of the record's graph (graph/step_record_head.tensorviz.json): its tensor and
    ∂loss/∂tensor. The advantages and rewards are the record's data: no gradient reaches them."""
    def pair(x: torch.Tensor) -> tuple[np.ndarray, np.ndarray | None]:
        grad = x.grad.detach().numpy().copy() if x.grad is not None else None
        return x.detach().numpy().copy(), grad

    objective = step.objective
    # L enters the loss through per_token = (L·IS weight − β·KL)·mask: ∂loss/∂L follows from it
    # (step.surrogate is L masked, a copy off the loss's path)
    assert step.per_token.grad is not None
    surrogate_grad = (step.per_token.grad * step.is_weight).detach().numpy().copy()
    return {"input": (rewards, None), "policy": pair(logp), "advantages": (advantages, None),
            "ratio": pair(step.ratio), "clipped": (step.surrogate.detach().numpy().copy(), surrogate_grad),
            "divergence": pair(step.kl),
            "aggregate": pair(objective), "neg@RecordedGRPO#0": pair(loss), "output": pair(loss)}


def _loss(step: TokenStep, mask: torch.Tensor, record: StepRecord | None) -> torch.Tensor:
    """The step's loss; a record whose framework divided its token sum by a global count
    (TRL dapo/cispo's num_items_in_batch over a larger batch) is divided by that count instead."""
    normalizer = record.config.token_normalizer if record is not None else None
    if normalizer is None or record is None or record.config.loss_aggregation != "token_mean":
        return step.loss
    return -(step.per_token * mask).sum() / normalizer


def _older_than(version: str, than: tuple[int, ...]) -> bool:
    """"0.26.2" < (0, 27); a version that is no dotted number ("", "main") counts as new."""
    parts = []
    for piece in version.split(".")[:len(than)]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            return False
        parts.append(int(digits))
    return tuple(parts) < than


def _std(x: np.ndarray) -> float:
    """Bessel's std (torch's, TRL's nanstd, UNIPO's array_std): 0 for one value."""
    return float(np.std(x, ddof=1)) if x.size > 1 else 0.0


def summary_metrics(record: StepRecord, rewards: np.ndarray, advantages: np.ndarray) -> dict[str, float]:
    """The batch's summaries frameworks log beside the loss: rewards, advantages and lengths over the
    record's completions (TRL's names where TRL logs them; checks.py maps UNIPO's and verl's).
    `reward_std` is the std over all the batch's scored completions (TRL since 0.27.0: `nanstd(rewards)`, before
    1.6 `rewards.std()`, in `_generate_and_score_completions`; UNIPO's and verl's); a TRL record older than
    0.27 gets that TRL's, the mean of each group's std (`std_rewards.mean()`, changed by TRL PR #4785)."""
    scored = rewards[~np.isnan(rewards)]
    lengths = np.asarray([c.mask_or_ones().sum() for _, _, c in record.completions()], dtype=np.float64)
    out: dict[str, float] = {}
    if scored.size:
        out["reward"] = float(scored.mean())
        if record.run.framework == "trl" and _older_than(record.run.framework_version, (0, 27)):
            spans, start = [], 0
            for g in record.groups:
                part = rewards[start:start + len(g.completions)]
                start += len(g.completions)
                spans.append(_std(part[~np.isnan(part)]))
            out["reward_std"] = float(np.mean(spans))
        else:
            out["reward_std"] = _std(scored)
    groups, start = [], 0
    for g in record.groups:
        part = rewards[start:start + len(g.completions)]
        start += len(g.completions)
        part = part[~np.isnan(part)]
        groups.append(part.size == 0 or bool(np.all(part == part[0])))
    out["frac_reward_zero_std"] = float(np.mean(groups))
    for name in record.reward_functions:
        values = np.asarray([np.nan if c.rewards[name] is None else c.rewards[name]
                             for _, _, c in record.completions()])
        values = values[~np.isnan(values)]
        if values.size:
            out[f"rewards/{name}/mean"], out[f"rewards/{name}/std"] = float(values.mean()), _std(values)
    out["advantage_mean"], out["advantage_std"] = float(np.mean(advantages)), _std(np.asarray(advantages))
    out["completions/mean_length"] = float(lengths.mean())
    out["completions/min_length"], out["completions/max_length"] = float(lengths.min()), float(lengths.max())
    return out


def _reduce(step: TokenStep, mask: torch.Tensor, c: Conventions,
            record: StepRecord | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """How `_loss` aggregates per-token terms (loss = −reduce(per_token)), for the loss's two parts."""
    normalizer = record.config.token_normalizer if record is not None else None
    if normalizer is None or record is None or record.config.loss_aggregation != "token_mean":
        return lambda x: conv.aggregate(x, mask, c.loss_aggregation, c.max_length)
    return lambda x: (x * mask).sum() / normalizer


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float((x * mask).sum() / mask.sum().clamp(min=1))


def _metrics(step: TokenStep, mask: torch.Tensor, c: Conventions, entropy: list, width: int, loss: float,
             micro_batches: list[list[int]]) -> dict:
    """TRL's metrics; under gradient accumulation, the mean over micro-batches of each one's own
    (TRL appends one value per micro-batch and log() averages them). The loss is the whole step's:
    TRL divides each micro-batch's by the accumulation steps (or the global token count) and sums."""
    if len(micro_batches) == 1:
        return {"loss": loss, **_batch_metrics(step, mask, c, entropy, width, slice(None))}
    parts = [_batch_metrics(step, mask, c, entropy, width, torch.tensor(rows)) for rows in micro_batches]
    return {"loss": loss, **{k: sum(p[k] for p in parts) / len(parts) for k in parts[0]}}


def _batch_metrics(step: TokenStep, full_mask: torch.Tensor, c: Conventions, entropy: list, width: int,
                   rows: slice | torch.Tensor) -> dict:
    """TRL's names and reductions (`global_masked_mean`) over the rows of one batch: token means,
    except clip flags at sequence level, which TRL averages over sequences."""
    seq = c.importance_sampling_level == "sequence"
    mask = full_mask[rows]

    def mean(flags: torch.Tensor) -> float:
        if seq:  # TRL's flags are (B, 1) here, one per sequence: the share of sequences
            return float((flags.double() * mask).amax(-1).mean())
        return _masked_mean(flags.double(), mask)

    out = {}
    if c.policy_loss == "cispo":
        out["cispo_clip_ratio"] = mean(step.clip_high[rows])
    else:
        low, high = step.clip_low[rows], step.clip_high[rows]
        out["clip_ratio/low_mean"] = mean(low)
        out["clip_ratio/high_mean"] = mean(high)
        out["clip_ratio/region_mean"] = mean(low | high)
        per_seq_low = (low.double() * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        per_seq_high = (high.double() * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        out["clip_ratio/low_min"] = float(per_seq_low.min())
        out["clip_ratio/high_max"] = float(per_seq_high.max())
    if c.beta != 0:
        out["kl"] = _masked_mean(step.kl_term.detach()[rows], mask)
    if all(e is not None for e in entropy):
        out["entropy"] = _masked_mean(_padded(entropy, width)[rows], mask)
    return out


def _one(gi: int, ci: int, row: int, n: int, advantage: float, logp: torch.Tensor, mask: torch.Tensor,
         step: TokenStep, weights: torch.Tensor, per_token: torch.Tensor,
         grad_parts: tuple[torch.Tensor, torch.Tensor]) -> CompletionResult:
    def take(x: torch.Tensor) -> np.ndarray:
        return x[row, :n].detach().numpy().copy()

    assert logp.grad is not None
    return CompletionResult(gi, ci, row, float(advantage), take(logp), take(mask), take(step.ratio),
                            take(step.surrogate), take(step.kl), take(per_token), take(weights.abs()),
                            take(logp.grad), take(grad_parts[0]), take(grad_parts[1]), take(step.is_weight),
                            take(step.clip_low), take(step.clip_high))
