"""verl 0.9.1's own GRPO code, called on the app's samples: advantages, loss, d loss / d log pi.

Nothing of verl's math is re-written here; these functions are called as verl's trainer calls them:

- advantages: the trainer's step (verl/trainer/ppo/ray_trainer.py ~line 1638, same in
  trainer/ppo/v1/trainer_base.py `_compute_advantage`): `apply_kl_penalty` when the KL is in the
  reward (use_kl_in_reward), else token_level_rewards = token_level_scores; then
  `ray_trainer.compute_advantage(..., AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo)`, which
  calls `core_algos.compute_grpo_outcome_advantage` with its default epsilon 1e-6. For another
  epsilon (verl's trainer cannot set one) `compute_grpo_outcome_advantage(epsilon=...)` is called
  directly.
- loss: `verl.workers.utils.losses.ppo_loss(config, model_output, data)`, the actor's loss in 0.9.1
  (the successor of dp_actor.py's update_policy): `compute_policy_loss_vanilla` (ratio with
  log-ratio clamped to ±20, clip band, dual clip c) + `kl_loss_coef` x `agg_loss(kl_penalty(...))`,
  with a real `verl.workers.config.ActorConfig`. `model_output["log_probs"]` is the app's log pi in
  verl's unpadded layout (a token's log-prob sits at the position before it), as a float64 leaf,
  so backward() gives verl's d loss / d log pi_i, scatter-added by action into (1, 4).

Mapping (app -> verl): advantage_std sample -> norm_adv_by_std_in_grpo=True (torch.std: Bessel),
none -> False; advantage_epsilon -> epsilon; clip_epsilon / clip_epsilon_high -> clip_ratio_low /
clip_ratio_high; dual_clip c -> clip_ratio_c (no dual clip -> clip_ratio_c = 1e12, which cannot bind:
verl's ratio is at most e^20); beta (kl_placement=loss) -> use_kl_loss, kl_loss_coef; beta
(kl_placement=reward) -> use_kl_in_reward, FixedKLController(beta); kl_estimator k1 / k2 / k3 ->
kl_loss_type / kl_penalty "k1" / "k2" / "low_var_kl"; loss_aggregation token_mean -> "token-mean",
token_sum_norm -> "seq-mean-token-sum-norm" with loss_scale_factor = max_length; the 2026 conventions
(issue 23): importance_sampling_level sequence -> policy_loss.loss_mode "gspo" (compute_policy_loss_gspo,
straight-through s_i·π/sg(π), its log clamped at 10 from above: the same value and, with equal weights over
a completion's tokens, the same gradient); policy_loss cispo -> loss_mode "cispo" (compute_policy_loss_cispo,
which clamps rho to [1 - clip_ratio_low, 1 + clip_ratio_high]: clip_ratio_high = eps_high - 1 and
clip_ratio_low = 1, no lower bound, is the app's TRL-style cap); is_correction -> the trainer's rollout
correction weights (rollout_corr_helper.compute_rollout_correction_weights: token / sequence, TIS for
*_truncate with an upper bound only, IcePop "lower_upper" for *_mask) passed to ppo_loss as
rollout_is_weights; sample_mean ->
"seq-mean-token-mean". That mode divides each sequence's token sum by (its token count + 1e-8)
(core_algos.py agg_loss, ~line 1196); the actor's mask is boolean, so the count is an integer tensor
and `count + 1e-8` is computed in torch's default dtype, float32, where 1 + 1e-8 == 1: as verl runs,
the 1e-8 vanishes. test_seq_mean_token_mean_epsilon shows it (1e-8 relative) under a float64 default.
verl runs here with torch's default dtype untouched (float32); every tensor it is given is float64.

What verl cannot express, and what the tests do instead:
- population std: verl's loss is given the app's advantages (advantages are not compared).
- verl's clamps are hard-coded: log-ratio ±20 in the policy loss; for low_var_kl (k3) Delta ±20 and
  the value ±10; k1 / k2 are never clamped. Where the app's clamps differ from these and either
  side's binds for some sample, the loss (or, for a KL in the reward, the advantages) is not compared.
  The app's verl preset uses exactly verl's bounds, and cases where they bind are compared.
- kl_bias_correction (TRL's k3 x rho): verl has none; with beta > 0 in the loss, not compared.
- GSPO with a binding dual clip or sequence-log-ratio clamp, a sequence-level CISPO, token-level IS weights
  with GSPO (verl's straight-through ratio puts each token's weight on that token alone:
  test_gspo_straight_through_gradient), a truncated IS with a lower bound: not compared (loss_gaps).

The conventions functions (app/engine/grpo/objective.py) are also tested directly on synthetic extreme
tensors, several tokens per completion and ragged masks, against the same verl functions.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage
from verl.trainer.ppo.rollout_corr_helper import SAFETY_BOUND, compute_rollout_correction_weights
from verl.utils import tensordict_utils as tu
from verl.workers.config import ActorConfig, PolicyLossConfig
from verl.workers.utils.losses import ppo_loss

from app.engine.grpo import objective as conv
from app.engine.grpo.params import Conventions
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from peers.cases import (
    CASES,
    Case,
    agree,
    any_flag,
    app_policy_grad,
    column,
    relative_difference,
    run_case,
    scatter_by_action,
)

FRAMEWORK = "verl"
VERL_LOG_RATIO_BOUND = 20.0  # compute_policy_loss_vanilla and kl_penalty_forward("low_var_kl"): hard-coded
VERL_K3_BOUND = 10.0  # kl_penalty_forward("low_var_kl"): the value clamped to ±10
VERL_GSPO_LOG_BOUND = 10.0  # compute_policy_loss_gspo: the sequence log-ratio clamped at max=10
VERL_IS_SAFETY_BOUND = 20.0  # rollout_corr_helper.SAFETY_BOUND: IS log-ratios clamped to ±20
VERL_TRAINER_EPSILON = 1e-6  # compute_grpo_outcome_advantage's default; compute_advantage passes none
NO_DUAL_CLIP = 1e12  # verl always has a dual clip; this c cannot bind while rho <= e^20
assert NO_DUAL_CLIP > math.exp(VERL_LOG_RATIO_BOUND)
assert SAFETY_BOUND == VERL_IS_SAFETY_BOUND
KL_NAMES = {"k1": "k1", "k2": "k2", "k3": "low_var_kl"}
AGG_MODES = {"sample_mean": "seq-mean-token-mean", "token_mean": "token-mean",
             "token_sum_norm": "seq-mean-token-sum-norm"}


def as_column(t: torch.Tensor) -> torch.Tensor:
    return t.unsqueeze(1)  # (G,) -> (G, 1): one response token


def advantage_data(result: StepResult) -> DataProto:
    size = len(result.samples)
    return verl_data(as_column(column(result, "reward")), as_column(column(result, "logp_old")),
                     as_column(column(result, "logp_ref")), torch.ones(size, 1, dtype=torch.int64))


def verl_data(token_level_scores: torch.Tensor, old_log_probs: torch.Tensor, ref_log_prob: torch.Tensor,
              response_mask: torch.Tensor) -> DataProto:
    """One group (one uid) as verl's trainer holds it before the advantages: (G, T) tensors, each
    sequence's score on its last response token (as verl's reward managers place it)."""
    return DataProto.from_dict(
        tensors={"token_level_scores": token_level_scores, "old_log_probs": old_log_probs,
                 "ref_log_prob": ref_log_prob, "response_mask": response_mask.to(torch.int64)},
        non_tensors={"uid": np.array(["prompt"] * len(token_level_scores), dtype=object)})


def verl_advantages(result: StepResult) -> DataProto:
    """verl's trainer step from rewards to advantages (module docstring), on the app's group."""
    return verl_trainer_advantages(result.params, advantage_data(result))


def verl_trainer_advantages(p: Conventions, data: DataProto) -> DataProto:
    """verl's trainer step from rewards to advantages (module docstring) on `data` (token_level_scores,
    old_log_probs, ref_log_prob, response_mask, uid), with the app's conventions `p` mapped to verl's."""
    if p.kl_placement == "reward" and p.beta > 0:
        controller = core_algos.FixedKLController(kl_coef=p.beta)
        data, _ = apply_kl_penalty(data, controller, kl_penalty=KL_NAMES[p.kl_estimator])
    else:
        data.batch["token_level_rewards"] = data.batch["token_level_scores"]
    normalise = p.advantage_std == "sample"
    if p.advantage_epsilon == VERL_TRAINER_EPSILON:
        return compute_advantage(data, core_algos.AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=normalise)
    advantages, returns = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=data.batch["token_level_rewards"], response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"], epsilon=p.advantage_epsilon, norm_adv_by_std_in_grpo=normalise)
    data.batch["advantages"], data.batch["returns"] = advantages, returns
    return data


def clamp_agrees(app_bound: float | None, verl_bound: float | None, app_hit: bool, verl_would_hit: bool) -> bool:
    """Same numbers if both clamp at the same bound, or if neither clamp binds."""
    return app_bound == verl_bound or (not app_hit and not verl_would_hit)


def kl_gaps(result: StepResult, logp_name: str) -> list[str]:
    """Why verl's kl_penalty would differ from the app's KL here (its hard-coded clamps), if it would."""
    p = result.params
    delta = column(result, "logp_ref") - column(result, logp_name)
    delta_hit, value_hit = any_flag(result, "kl_log_ratio_clamped"), any_flag(result, "kl_clamped")
    if p.kl_estimator == "k3":
        gaps = []
        if not clamp_agrees(p.log_ratio_clamp, VERL_LOG_RATIO_BOUND, delta_hit, bool(delta.abs().max() > 20)):
            gaps.append(f"k3's Delta clamp: app {p.log_ratio_clamp}, verl ±20, and one binds")
        if not clamp_agrees(p.kl_clamp, VERL_K3_BOUND, value_hit, bool(column(result, "divergence").max() > 10)):
            gaps.append(f"k3's value clamp: app {p.kl_clamp}, verl ±10, and one binds")
        return gaps
    return []  # like verl, the app never clamps k1 or k2


def advantage_gaps(result: StepResult) -> list[str]:
    p = result.params
    gaps = ["population std: verl has Bessel std or none"] if p.advantage_std == "population" else []
    if p.kl_placement == "reward" and p.beta > 0:
        gaps += kl_gaps(result, "logp_old")
    return gaps


def loss_mode(p: Conventions) -> str:
    """verl's policy_loss.loss_mode for the app's conventions: cispo, gspo (sequence-level ratio), vanilla."""
    if p.policy_loss == "cispo":
        return "cispo"
    return "gspo" if p.importance_sampling_level == "sequence" else "vanilla"


def is_gaps(p: Conventions, log_is_ratio: torch.Tensor | None) -> list[str]:
    """Why verl's rollout correction (rollout_corr_helper.compute_rollout_correction_weights) cannot give the
    app's IS weights: its truncation (TIS) has an upper bound only; its masking (IcePop) keeps [lower, upper]."""
    if p.is_correction == "none":
        return []
    gaps = []
    if p.is_correction.endswith("truncate") and (p.is_clip_min is not None or p.is_clip_max is None):
        gaps.append("verl's truncated IS has an upper bound only")
    if log_is_ratio is not None and bool(log_is_ratio.abs().max() > VERL_IS_SAFETY_BOUND):
        gaps.append("an IS log-ratio beyond verl's safety bound ±20")
    if log_is_ratio is not None and p.is_correction.endswith("mask"):
        ratio = log_is_ratio.exp()
        kept = (ratio >= (p.is_clip_min or 0.0)) & (ratio <= (p.is_clip_max or math.inf))
        if not bool(kept.any()):
            gaps.append("every IS weight is masked to 0: verl's IS metrics divide by zero (its ESS)")
    return gaps


def loss_gaps(result: StepResult) -> list[str]:
    p = result.params
    gaps = [g for g in advantage_gaps(result) if not g.startswith("population")]  # population: app's A is fed
    log_ratio = column(result, "logp") - column(result, "logp_old")
    mode = loss_mode(p)
    if p.policy_loss == "cispo" and p.importance_sampling_level == "sequence":
        gaps.append("a sequence-level CISPO: verl's cispo is token-level")
    if mode == "gspo":
        # verl's GSPO clamps the sequence's log-ratio from above at 10 only, and has no dual clip
        seq = getattr(result, "sequence_log_ratio", log_ratio)
        if any_flag(result, "ratio_clamped") or bool(seq.max() > VERL_GSPO_LOG_BOUND):
            gaps.append("a clamp of the sequence log-ratio binds (verl's GSPO: at 10, from above only)")
        if any_flag(result, "dual_clip_hit"):
            gaps.append("the dual clip binds; verl's GSPO has none")
        if p.is_correction.startswith("token"):
            gaps.append("token-level IS weights with GSPO: verl's straight-through ratio puts each token's weight "
                        "on that token's gradient alone (test_gspo_straight_through_gradient)")
    else:
        ratio_hit = bool(log_ratio.abs().max() > VERL_LOG_RATIO_BOUND)
        if not clamp_agrees(p.log_ratio_clamp, VERL_LOG_RATIO_BOUND, any_flag(result, "ratio_clamped"), ratio_hit):
            gaps.append(f"the ratio's log clamp: app {p.log_ratio_clamp}, verl ±20, and one binds")
    gaps += is_gaps(p, getattr(result, "log_is_ratio", None))
    if p.kl_placement == "loss" and p.beta > 0:
        if p.kl_bias_correction:
            gaps.append("kl_bias_correction (k3 x rho): verl has none")
        gaps += kl_gaps(result, "logp")
    return gaps


def actor_config(p: Conventions, group_size: int) -> ActorConfig:
    kl_in_loss = p.kl_placement == "loss" and p.beta > 0
    mode = loss_mode(p)
    # verl's cispo clamps rho to [1 - clip_ratio_low, 1 + clip_ratio_high]: the app's (TRL's) cap eps_high is
    # clip_ratio_high = eps_high - 1, and clip_ratio_low = 1 a lower bound of 0, which no ratio reaches
    low, high = (1.0, p.clip_epsilon_high - 1) if mode == "cispo" else (p.clip_epsilon, p.clip_epsilon_high)
    return ActorConfig(
        strategy="fsdp", rollout_n=group_size, ppo_mini_batch_size=1, ppo_micro_batch_size_per_gpu=group_size,
        clip_ratio=low, clip_ratio_low=low, clip_ratio_high=high, policy_loss=PolicyLossConfig(loss_mode=mode),
        clip_ratio_c=NO_DUAL_CLIP if p.dual_clip is None else p.dual_clip,
        loss_agg_mode=AGG_MODES[p.loss_aggregation],
        loss_scale_factor=p.max_length if p.loss_aggregation == "token_sum_norm" else None,
        use_kl_loss=kl_in_loss, kl_loss_coef=p.beta if kl_in_loss else 0.0, kl_loss_type=KL_NAMES[p.kl_estimator])


def verl_is_weights(p: Conventions, logp_old: torch.Tensor, logp_sampling: torch.Tensor,
                    response_mask: torch.Tensor) -> torch.Tensor | None:
    """verl's rollout-correction weights (rollout_corr_helper.compute_rollout_correction_weights, as the trainer
    computes them) for the app's is_correction: rollout_is token / sequence; truncate -> TIS with the upper
    bound; mask -> IcePop "lower_upper" (an absent bound: 1e-300 or 1e300, beyond every weight verl can make)."""
    if p.is_correction == "none":
        return None
    level, how = p.is_correction.split("_")
    if how == "truncate":
        threshold: str | float = p.is_clip_max
    else:
        threshold = f"{p.is_clip_min if p.is_clip_min is not None else 1e-300}_" \
                    f"{p.is_clip_max if p.is_clip_max is not None else 1e300}"
    weights, _ = compute_rollout_correction_weights(log_ratio=logp_old - logp_sampling, response_mask=response_mask,
                                                    rollout_is=level, rollout_is_threshold=threshold)
    return weights


def verl_loss(result: StepResult, advantages: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's actor loss on the app's step; returns (loss, d loss / d logp_i as (G,)). With an IS correction
    the rollout engine's log-probs are log pi_old: the toy's pi_old sampled its group itself."""
    size = len(result.samples)
    logp = as_column(column(result, "logp")).requires_grad_(True)
    logp_old, mask = as_column(column(result, "logp_old")), torch.ones(size, 1, dtype=torch.int64)
    loss = verl_actor_loss(actor_config(result.params, size), logp, logp_old, as_column(column(result, "logp_ref")),
                           as_column(advantages), mask,
                           rollout_is_weights=verl_is_weights(result.params, logp_old, logp_old, mask))
    return loss, logp.grad[:, 0]


def verl_actor_loss(config: ActorConfig, logp: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor,
                    advantages: torch.Tensor, response_mask: torch.Tensor, prompt_length: int = 1,
                    rollout_is_weights: torch.Tensor | None = None) -> torch.Tensor:
    """verl's actor loss `ppo_loss` on (G, T) right-padded responses after `prompt_length` prompt tokens;
    `logp` is a leaf, so after this returns (it runs backward) logp.grad is verl's d loss / d logp."""
    size, width = logp.shape
    lengths = [int(n) for n in response_mask.sum(-1)]
    # unpadded model output: each sequence's prompt and response tokens, back to back; a response token's
    # log-prob is emitted at the position before it (no_padding_2_padding), so the sequence's first
    # prompt_length - 1 positions and its last one carry nothing the loss reads
    log_probs = torch.cat([piece for i, n in enumerate(lengths)
                           for piece in (logp.new_zeros(prompt_length - 1), logp[i, :n], logp.new_zeros(1))])
    ids = torch.zeros(size, prompt_length, dtype=torch.int64)
    mask = response_mask.to(torch.int64)
    data = TensorDict({
        "prompts": ids, "responses": torch.zeros(size, width, dtype=torch.int64),
        "attention_mask": torch.cat([torch.ones_like(ids), mask], dim=1), "response_mask": mask,
        "old_log_probs": logp_old, "ref_log_prob": logp_ref, "advantages": advantages,
        **({} if rollout_is_weights is None else {"rollout_is_weights": rollout_is_weights}),
    }, batch_size=[size])
    # what the FSDP engine assigns before calling the loss (workers/engine/fsdp/transformer_impl.py
    # forward_backward_batch: batch_num_tokens = loss_mask.sum()) and the trainer (global_batch_size):
    # one data-parallel rank
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=size)
    loss, _ = ppo_loss(config, {"log_probs": log_probs}, data)
    loss.backward()
    return loss


def case_params(case: Case) -> GRPOParams:
    return GRPOParams(**case.params)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_advantages(case):
    """verl's advantages (and, with the KL in the reward, its penalised rewards) equal the app's."""
    result = run_case(case)
    gaps = advantage_gaps(result)
    if gaps:
        pytest.skip("; ".join(gaps))
    data = verl_advantages(result)
    agree(FRAMEWORK, "advantages", case.id, data.batch["advantages"][:, 0], column(result, "advantage"))
    agree(FRAMEWORK, "rewards after the KL penalty", case.id, data.batch["token_level_rewards"][:, 0],
          column(result, "reward_used"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_loss_and_gradient(case):
    """verl's actor loss and d loss / d log pi(c) equal the app's, wherever verl can express the step."""
    result = run_case(case)
    gaps = loss_gaps(result)
    if gaps:
        pytest.skip("; ".join(gaps))
    p = result.params
    advantages = (column(result, "advantage") if p.advantage_std == "population"
                  else verl_advantages(result).batch["advantages"][:, 0])
    loss, grad = verl_loss(result, advantages)
    mode = AGG_MODES[p.loss_aggregation]
    agree(FRAMEWORK, f"loss ({mode})", case.id, loss, result.loss)
    agree(FRAMEWORK, f"d loss / d log pi ({mode})", case.id,
          scatter_by_action(grad, column(result, "action")), app_policy_grad(result))


def test_seq_mean_token_mean_epsilon():
    """verl's seq-mean-token-mean divides by (count + 1e-8): invisible in its float32 default dtype (above),
    1e-8 relative, exactly, when torch's default dtype is float64."""
    result = run_case(next(c for c in CASES if c.id == "verl-sample-mean"))
    advantages = verl_advantages(result).batch["advantages"][:, 0]
    assert float(verl_loss(result, advantages)[0].detach()) == pytest.approx(result.loss, rel=1e-15, abs=0)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        loss, _ = verl_loss(result, advantages)
    finally:
        torch.set_default_dtype(before)
    assert abs(float(loss.detach()) / result.loss - 1 / (1 + 1e-8)) < 1e-14


def test_the_spread_reaches_what_it_claims():
    """Each case's claimed flags hold (dual clip, clamps), and verl's comparisons include them."""
    for case in CASES:
        result = run_case(case)
        for flag in case.hits:
            assert any_flag(result, flag), f"{case.id} no longer reaches {flag}"
    compared = {c.id for c in CASES if not loss_gaps(run_case(c))}
    for needed in ("preset-gspo", "gspo-eps0.2", "verl-sequence", "preset-cispo", "verl-cispo-cap1.2",
                   "cispo-cap1.1-one-of-eight", "cispo-dual-clip-step",
                   "verl-dual-clip-hit", "deepseekmath-dual-clip3-hit", "verl-clamps-hit", "verl-kl-clamp-hit",
                   "dapo-clamps-hit", "verl-iteration20", "kl-reward-k1", "kl-reward-k2", "verl-kl-reward-k3",
                   "verl-kl-k1", "verl-kl-k2",
                   "verl-kl-k2-unclamped", "verl-token-sum-norm-L3", "verl-sample-mean", "std-population"):
        assert needed in compared, needed


def test_verl_preset_is_verl_defaults():
    """The app's `verl` preset (app/engine/presets.py) is verl's ActorConfig / AlgoConfig defaults."""
    actor = ActorConfig(strategy="fsdp", rollout_n=8, ppo_micro_batch_size_per_gpu=8)
    algo = AlgoConfig()
    preset = GRPOParams(preset="verl")
    assert (preset.clip_epsilon, preset.clip_epsilon_high) == (actor.clip_ratio_low, actor.clip_ratio_high)
    assert preset.dual_clip == actor.clip_ratio_c
    assert preset.beta == actor.kl_loss_coef and KL_NAMES[preset.kl_estimator] == actor.kl_loss_type
    assert AGG_MODES[preset.loss_aggregation] == actor.loss_agg_mode
    assert preset.advantage_std == "sample" and algo.norm_adv_by_std_in_grpo
    signature = inspect.signature(core_algos.compute_grpo_outcome_advantage)
    assert preset.advantage_epsilon == signature.parameters["epsilon"].default == VERL_TRAINER_EPSILON
    assert (preset.log_ratio_clamp, preset.kl_clamp) == (VERL_LOG_RATIO_BOUND, VERL_K3_BOUND)
    # verl's hard-coded clamps, seen through its own functions
    far = torch.tensor([[0.0]], dtype=torch.float64), torch.tensor([[30.0]], dtype=torch.float64)
    assert float(core_algos.kl_penalty(*far, "low_var_kl")) == VERL_K3_BOUND


# --- the conventions functions on synthetic extremes, several tokens per completion ---------------

def ragged(groups: int = 5, tokens: int = 7, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([1, 3, tokens, 2, 5])[:groups]
    mask = (torch.arange(tokens).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    return gen, mask


@pytest.mark.parametrize("estimator", list(KL_NAMES))
def test_conventions_kl_estimate_at_extremes(estimator):
    """kl_estimate (k1, k2, k3 with verl's ±20 / 10 clamps) equals verl's kl_penalty, values and
    gradients, for Delta from -40 to 40: well past both clamps."""
    delta = torch.linspace(-40, 40, 81, dtype=torch.float64).reshape(9, 9)
    bounds = (VERL_LOG_RATIO_BOUND, VERL_K3_BOUND) if estimator == "k3" else (None, None)
    ours_logp, theirs_logp = (torch.full_like(delta, -1.5).requires_grad_(True) for _ in range(2))
    ours = conv.kl_estimate(ours_logp, ours_logp.detach() + delta, estimator, *bounds).value
    theirs = core_algos.kl_penalty(theirs_logp, theirs_logp.detach() + delta, KL_NAMES[estimator])
    ours.sum().backward()
    theirs.sum().backward()
    where = f"{estimator}, Delta in [-40, 40]"
    agree(FRAMEWORK, "conventions.kl_estimate (synthetic)", where, theirs, ours)
    agree(FRAMEWORK, "conventions.kl_estimate grad (synthetic)", where, theirs_logp.grad, ours_logp.grad)


@pytest.mark.parametrize("mode", list(AGG_MODES))
def test_conventions_aggregate_ragged(mode):
    """aggregate equals verl's agg_loss on completions of 1 to 7 tokens."""
    gen, mask = ragged()
    per_token = torch.randn(mask.shape, generator=gen, dtype=torch.float64) * 3
    ours = conv.aggregate(per_token, mask, mode, max_length=9)
    # a boolean mask, as the actor passes it (losses.py ppo_loss): see the module docstring on the 1e-8
    theirs = core_algos.agg_loss(per_token, mask.to(torch.bool), AGG_MODES[mode], loss_scale_factor=9)
    agree(FRAMEWORK, f"conventions.aggregate (synthetic, {AGG_MODES[mode]})", "ragged 1..7 tokens", theirs, ours)


def test_conventions_policy_loss_at_extremes():
    """The app's ratio (log-ratio clamped to ±20), clipped surrogate with clip-higher and dual clip
    c = 3, token-mean aggregation, equal verl's compute_policy_loss_vanilla for log-ratios up to ±30."""
    gen, mask = ragged()
    log_ratio = (torch.rand(mask.shape, generator=gen, dtype=torch.float64) - 0.5) * 60  # [-30, 30]
    log_ratio[0, 0], log_ratio[1, 0] = 25.0, -25.0
    advantages = torch.randn(mask.shape[0], 1, generator=gen, dtype=torch.float64).expand_as(mask).clone()
    advantages[0], advantages[1] = -1.0, 1.0
    old = torch.randn(mask.shape, generator=gen, dtype=torch.float64) - 2
    config = ActorConfig(strategy="fsdp", rollout_n=5, ppo_micro_batch_size_per_gpu=5, clip_ratio=0.2,
                         clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)
    results = []
    for side in ("app", "verl"):
        logp = (old + log_ratio).requires_grad_(True)
        if side == "app":
            ratio = torch.exp(conv.clamp_log_ratio(logp - old, VERL_LOG_RATIO_BOUND)[0])
            surrogate = conv.clipped_surrogate(ratio, advantages, 0.2, 0.28, 3.0)
            assert surrogate.dual_clip_hit.any() and surrogate.clip_active.any()
            loss = -conv.aggregate(surrogate.value, mask, "token_mean", max_length=mask.shape[1])
        else:
            loss, _ = core_algos.compute_policy_loss_vanilla(old, logp, advantages, mask.to(torch.bool), "token-mean",
                                                             config)
        loss.backward()
        results.append((loss.detach(), logp.grad))
    (app_loss, app_grad), (verl_loss_, verl_grad) = results
    agree(FRAMEWORK, "conventions.policy loss (synthetic)", "log-ratios in [-30, 30]", verl_loss_, app_loss)
    agree(FRAMEWORK, "conventions.policy loss grad (synthetic)", "log-ratios in [-30, 30]", verl_grad, app_grad)


@pytest.mark.parametrize("std", ["sample", "none"])
def test_conventions_group_advantages(std):
    """group_advantages equals compute_grpo_outcome_advantage on continuous, equal and two-valued groups."""
    gen = torch.Generator().manual_seed(1)
    groups = [torch.randn(7, generator=gen, dtype=torch.float64) * 5, torch.full((4,), 0.3, dtype=torch.float64),
              torch.tensor([1e6, -1e6, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)]
    for rewards in groups:
        ours = conv.group_advantages(rewards, std, 1e-6)
        theirs, _ = core_algos.compute_grpo_outcome_advantage(
            rewards.unsqueeze(1), torch.ones(len(rewards), 1), np.zeros(len(rewards)), epsilon=1e-6,
            norm_adv_by_std_in_grpo=std == "sample")
        agree(FRAMEWORK, "conventions.group_advantages (synthetic)", f"{std}, G={len(rewards)}", theirs[:, 0], ours)


# --- the 2026 conventions (issue 23): verl's GSPO and CISPO policy losses, called directly --------------

def synthetic_policy_case(seed: int = 4):
    gen, mask = ragged()
    gen.manual_seed(seed)
    old = -torch.rand(mask.shape, generator=gen, dtype=torch.float64) * 3 - 0.05
    log_ratio = torch.randn(mask.shape, generator=gen, dtype=torch.float64) * 0.5
    advantages = torch.tensor([[-0.9], [1.1], [0.4], [-0.3], [1.3]], dtype=torch.float64).expand_as(mask).clone()
    return mask, old, log_ratio, advantages


def app_policy_loss(p: Conventions, logp, old, advantages, mask, weights=None):
    """The app's conventions functions as token_grpo_step composes them (β = 0), then minus."""
    log_ratio, _ = conv.policy_log_ratio(logp, old, mask, p.importance_sampling_level, p.log_ratio_clamp)
    ratio = torch.exp(log_ratio) * mask
    surrogate = conv.policy_surrogate(p.policy_loss, ratio, advantages * mask, logp, p.clip_epsilon,
                                      p.clip_epsilon_high, p.dual_clip)
    value = surrogate.value if weights is None else surrogate.value * weights
    return -conv.aggregate(value * mask, mask, p.loss_aggregation, p.max_length), surrogate


VERL_POLICY_LOSSES = {"gspo": core_algos.compute_policy_loss_gspo, "cispo": core_algos.compute_policy_loss_cispo}


@pytest.mark.parametrize("agg", list(AGG_MODES))
@pytest.mark.parametrize("fields", [
    {"preset": "gspo", "clip_epsilon": 0.05, "clip_epsilon_high": 0.06}, {"preset": "gspo"},
    {"preset": "cispo", "clip_epsilon_high": 1.2}, {"preset": "cispo"},
    {"policy_loss": "cispo", "clip_epsilon_high": 0.9},
], ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_conventions_gspo_and_cispo_against_verl(fields, agg):
    """compute_policy_loss_gspo / compute_policy_loss_cispo (core_algos.py, verl 0.9.1) equal the app's
    policy_log_ratio + policy_surrogate + aggregate on ragged completions, loss and d loss / d logp. verl's
    GSPO ratio is the straight-through s_i·π/sg(π): the value s_i, the gradient per token s_i — the app's
    exp(mean log-ratio) gives each token s_i/|o_i| of it, and the aggregation's |o_i| equal weights add it up
    to the same. verl's CISPO clamps to [1 - clip_ratio_low, 1 + clip_ratio_high]: the app's cap eps_high
    with clip_ratio_high = eps_high - 1 and a lower bound of 0."""
    p = Conventions(**fields, loss_aggregation=agg, max_length=9)
    mask, old, log_ratio, advantages = synthetic_policy_case()
    mode = loss_mode(p)
    config = actor_config(p, 5)
    config.global_batch_info["loss_scale_factor"] = config.loss_scale_factor  # as ppo_loss sets it before the call
    results = []
    for side in ("app", "verl"):
        logp = (old + log_ratio).requires_grad_(True)
        if side == "app":
            loss, surrogate = app_policy_loss(p, logp, old, advantages[:, :1], mask)
            if fields.get("clip_epsilon_high") in (0.06, 1.2):
                assert surrogate.clip_active.any() and not surrogate.clip_active.all()
        else:
            loss, _ = VERL_POLICY_LOSSES[mode](old, logp, advantages, mask.to(torch.bool), AGG_MODES[agg], config)
        loss.backward()
        results.append((loss.detach(), logp.grad))
    (app_loss, app_grad), (verl_loss_, verl_grad) = results
    where = f"{','.join(f'{k}={v}' for k, v in fields.items())}, {agg}, 1..7 tokens"
    agree(FRAMEWORK, f"conventions.{mode} loss (synthetic)", where, verl_loss_, app_loss)
    agree(FRAMEWORK, f"conventions.{mode} d loss / d logp (synthetic)", where, verl_grad, app_grad)


def test_gspo_straight_through_gradient():
    """Where per-token weights differ within a completion (token-level IS weights), verl's straight-through
    GSPO ratio gives each token its own weight's share of the gradient; the app's (TRL's) sequence ratio
    spreads the completion's weighted sum over its tokens. The same loss, other gradients: so the peers do
    not compare GSPO with token-level IS weights against verl (loss_gaps)."""
    p = Conventions(preset="gspo", clip_epsilon=0.5, clip_epsilon_high=0.5)
    mask, old, log_ratio, advantages = synthetic_policy_case()
    weights = (torch.arange(mask.shape[1], dtype=torch.float64) * 0.3 + 0.4).expand_as(mask) * mask
    results = []
    for side in ("app", "verl"):
        logp = (old + log_ratio).requires_grad_(True)
        if side == "app":
            loss, _ = app_policy_loss(p, logp, old, advantages[:, :1], mask, weights)
        else:
            loss, _ = core_algos.compute_policy_loss_gspo(old, logp, advantages, mask.to(torch.bool),
                                                          "seq-mean-token-mean", actor_config(p, 5),
                                                          rollout_is_weights=weights)
        loss.backward()
        results.append((loss.detach(), logp.grad))
    (app_loss, app_grad), (verl_loss_, verl_grad) = results
    assert relative_difference(verl_loss_, app_loss) < 1e-14
    assert relative_difference(verl_grad, app_grad) > 1e-2
    # each completion's gradient sums to the same total: only its spread over the tokens differs
    assert relative_difference(verl_grad.sum(-1), app_grad.sum(-1)) < 1e-14


def test_verl_cispo_defaults_clamp_from_below_too():
    """verl's cispo with its ActorConfig defaults (clip_ratio_low = clip_ratio_high = 0.2) clamps the ratio to
    [0.8, 1.2]: two-sided, where TRL's (the app's) caps it from above only. The app's cispo with cap 1.2 is
    verl's only where no ratio is below 0.8 — here some are, and the gradients differ."""
    p = Conventions(preset="cispo", clip_epsilon_high=1.2)
    mask, old, log_ratio, advantages = synthetic_policy_case()
    assert bool((log_ratio.exp()[mask.bool()] < 0.8).any())
    results = []
    for side in ("app", "verl"):
        logp = (old + log_ratio).requires_grad_(True)
        if side == "app":
            loss, _ = app_policy_loss(p, logp, old, advantages[:, :1], mask)
        else:
            defaults = ActorConfig(strategy="fsdp", rollout_n=5, ppo_micro_batch_size_per_gpu=5,
                                   policy_loss=PolicyLossConfig(loss_mode="cispo"))
            assert (defaults.clip_ratio_low, defaults.clip_ratio_high) == (0.2, 0.2)
            loss, _ = core_algos.compute_policy_loss_cispo(old, logp, advantages, mask.to(torch.bool), "token-mean",
                                                           defaults)
        loss.backward()
        results.append(logp.grad)
    assert relative_difference(results[1], results[0]) > 1e-2
