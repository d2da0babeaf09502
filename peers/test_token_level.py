"""Token-level peer tests (issue 13): the app's `token_grpo_step` against TRL's and verl's own code on
real groups from the tiny LM, with real ragged lengths and right padding (peers/token_cases.py).

The same padded (G, T) tensors (log pi, log pi_old, log pi_ref, the mask, padding positions included)
go to the app and to the frameworks, called exactly as peers/test_trl.py and peers/test_verl.py call
them and with their mapping of the conventions (imported from there, not re-typed):

- TRL: `GRPOTrainer._generate_and_score_completions` (advantages; TRL pads the completions and builds
  the mask itself from their lengths) and `GRPOTrainer._compute_loss` (loss; its backward gives
  d loss / d logp per token), with float64 as torch's default dtype; loss_type grpo (sample_mean),
  dapo and bnpo (token_mean), dr_grpo (token_sum_norm, max_completion_length = max_length).
- verl: `compute_advantage` / `compute_grpo_outcome_advantage` on token-level scores (each reward on
  its sequence's last response token, as verl's reward managers place it; with the KL in the reward,
  `apply_kl_penalty` subtracts it per token first), and the actor's `ppo_loss`
  (`compute_policy_loss_vanilla` + `kl_penalty` + `agg_loss`, loss_agg_mode seq-mean-token-mean,
  token-mean, seq-mean-token-sum-norm) fed in verl's unpadded layout after the group's real prompt.

Compared, to 1e-9 relative (peers/cases.py `agree`): advantages ((G, T), broadcast on the real tokens),
rewards after the KL penalty, the loss, and d loss / d logp for every token (0 on padding on both
sides). Skips name what the framework lacks, through the same gap functions as the toy's tests.

Precision: the largest differences (~1e-14, verl, KL in the reward on an all-equal group) are float
rounding, not conventions: verl sums (score_t - beta * KL_t) over the tokens, the app r - beta * sum KL_t;
the two sums differ by one ulp, and the group's std of the penalised rewards (0.003 there) magnifies it
in the advantages.

`test_a_swapped_aggregation_is_caught` is a mutation test: it shows the comparisons can fail.
"""
from __future__ import annotations

import pytest
import torch

from app.engine.grpo import objective as conv
from app.engine.grpo.presets import PRESET_NAMES
from app.kinds.tiny_lm.domain.arith_task import PAD, TOKEN_ID
from app.kinds.toy.engine.params import GRPOParams
from peers.cases import TOKEN_AGREEMENT, agree, relative_difference
from peers.test_trl import loss_types, trl_advantages_apply, trl_config, trl_loss_gaps, trl_step
from peers.test_verl import (
    AGG_MODES,
    actor_config,
    advantage_gaps,
    loss_gaps,
    verl_actor_loss,
    verl_data,
    verl_is_weights,
    verl_trainer_advantages,
)
from peers.token_cases import (
    AGGREGATIONS,
    CONVENTION_CASES,
    GROUP_CASES,
    IS_MODES,
    ConventionCase,
    GroupCase,
    TokenGroup,
    app_step,
    build_group,
    grpo_params,
    token_rows,
)


def agree_token(framework: str, quantity: str, aggregation: str, where: str, got, want) -> None:
    rel = agree(framework, f"token-level {quantity}", where, got, want)
    TOKEN_AGREEMENT.record(framework, aggregation, rel, where)


def broadcast(advantages: torch.Tensor, group: TokenGroup) -> torch.Tensor:
    """(G,) -> (G, T): each completion's advantage on its real tokens, 0 on padding (verl's layout)."""
    return advantages.detach().unsqueeze(1) * group.mask


# --- TRL ------------------------------------------------------------------------------------------

def run_trl(tmp_path, group: TokenGroup, case: ConventionCase, loss_type: str):
    """The app's step, then TRL's on the same padded tensors. Returns (app step, app grad, TRL's
    scored inputs, TRL's loss, TRL's d loss / d logp)."""
    params = grpo_params(case)
    step, grad = app_step(group, params)
    # a KL in the reward is a reward function's penalty for TRL: it gets the app's penalised reward
    # (trl_config then sets beta = 0), as in test_trl.py
    rewards = step.reward_used.detach()
    scored, loss, trl_grad = trl_step(
        trl_config(tmp_path, params, len(group.rewards), loss_type), rewards, group.logp, group.logp_old,
        group.logp_ref, group.lengths,
        advantages=None if trl_advantages_apply(params) else step.advantages.detach(),
        logp_sampling=group.logp_sampling if params.is_correction != "none" else None)
    # plumbing, not math: TRL padded the completions and built the same mask, and scored the same pi_old
    assert torch.equal(scored["completion_mask"].to(torch.float64), group.mask)
    assert torch.equal(scored["old_per_token_logps"], group.logp_old)
    return step, grad, scored, loss, trl_grad


ADVANTAGE_CASES = [pytest.param(g, c, id=f"{g.id}-{c.id}") for g in GROUP_CASES for c in CONVENTION_CASES
                   if c.advantages]
LOSS_CASES = [pytest.param(g, c, t, id=f"{g.id}-{c.id}-{t}") for g in GROUP_CASES for c in CONVENTION_CASES
              for t in loss_types(grpo_params(c))]


@pytest.mark.parametrize(("group_case", "case"), ADVANTAGE_CASES)
def test_trl_advantages(group_case: GroupCase, case: ConventionCase, tmp_path):
    params = grpo_params(case)
    if not trl_advantages_apply(params):
        pytest.skip(f"advantage_std={params.advantage_std}, eps={params.advantage_epsilon:g}: TRL has Bessel std "
                    "with eps 1e-4, or none")
    group = build_group(group_case)
    step, _, scored, _, _ = run_trl(tmp_path, group, case, (loss_types(params) or ("dapo",))[0])
    agree_token("TRL", "advantages", "advantages", f"{group_case.id} {case.id}", scored["advantages"], step.advantages)


@pytest.mark.parametrize(("group_case", "case", "loss_type"), LOSS_CASES)
def test_trl_loss_and_gradient(group_case: GroupCase, case: ConventionCase, loss_type: str, tmp_path):
    params = grpo_params(case)
    group = build_group(group_case)
    step, _ = app_step(group, params)
    gaps = trl_loss_gaps(token_rows(group, params, step))
    if gaps:
        pytest.skip("; ".join(gaps))
    step, grad, _, loss, trl_grad = run_trl(tmp_path, group, case, loss_type)
    where = f"{group_case.id} {case.id}"
    agg = params.loss_aggregation
    agree_token("TRL", f"loss ({agg} -> {loss_type})", agg, where, loss, step.loss)
    agree_token("TRL", f"d loss / d logp ({agg} -> {loss_type})", agg, where, trl_grad, grad)


# --- verl -----------------------------------------------------------------------------------------

def token_level_scores(group: TokenGroup) -> torch.Tensor:
    """(G, T): each sequence's reward on its last real response token, 0 elsewhere."""
    scores = torch.zeros_like(group.mask)
    last = torch.tensor(group.lengths) - 1
    scores[torch.arange(len(last)), last] = group.rewards
    return scores


def verl_group_advantages(group: TokenGroup, params):
    data = verl_data(token_level_scores(group), group.logp_old, group.logp_ref, group.mask)
    return verl_trainer_advantages(params, data)


@pytest.mark.parametrize(("group_case", "case"), ADVANTAGE_CASES)
def test_verl_advantages(group_case: GroupCase, case: ConventionCase):
    params = grpo_params(case)
    group = build_group(group_case)
    step, _ = app_step(group, params)
    gaps = advantage_gaps(token_rows(group, params, step))
    if gaps:
        pytest.skip("; ".join(gaps))
    data = verl_group_advantages(group, params)
    where = f"{group_case.id} {case.id}"
    agree_token("verl", "advantages", "advantages", where, data.batch["advantages"], broadcast(step.advantages, group))
    # with the KL in the reward, verl's per-token penalty summed over each sequence is the app's
    agree("verl", "token-level rewards after the KL penalty", where,
          data.batch["token_level_rewards"].sum(-1), step.reward_used)


VERL_LOSS_CASES = [pytest.param(g, c, id=f"{g.id}-{c.id}") for g in GROUP_CASES for c in CONVENTION_CASES]


@pytest.mark.parametrize(("group_case", "case"), VERL_LOSS_CASES)
def test_verl_loss_and_gradient(group_case: GroupCase, case: ConventionCase):
    params = grpo_params(case)
    group = build_group(group_case)
    step, grad = app_step(group, params)
    gaps = loss_gaps(token_rows(group, params, step))
    if gaps:
        pytest.skip("; ".join(gaps))
    # population std: verl has none, so its loss is given the app's advantages (as in test_verl.py)
    advantages = (broadcast(step.advantages, group) if params.advantage_std == "population"
                  else verl_group_advantages(group, params).batch["advantages"])
    logp = group.logp.clone().requires_grad_(True)
    loss = verl_actor_loss(actor_config(params, len(group.rewards)), logp, group.logp_old, group.logp_ref,
                           advantages, group.mask, prompt_length=group.prompt_length,
                           rollout_is_weights=verl_is_weights(params, group.logp_old, group.logp_sampling,
                                                              group.mask))
    where = f"{group_case.id} {case.id}"
    agg = params.loss_aggregation
    mode = AGG_MODES[agg]
    agree_token("verl", f"loss ({agg} -> {mode})", agg, where, loss, step.loss)
    agree_token("verl", f"d loss / d logp ({agg} -> {mode})", agg, where, logp.grad, grad)


# --- what the spread reaches ----------------------------------------------------------------------

@pytest.mark.parametrize("group_case", GROUP_CASES, ids=lambda g: g.id)
def test_the_groups_are_what_they_claim(group_case: GroupCase):
    """Real sampled groups: right-padded, ratios away from 1 with clipped tokens, KL > 0, and the
    claims of each case (all-equal rewards, verl's dual clip or KL clamp binding)."""
    group = build_group(group_case)
    size, width = group.mask.shape
    lengths = torch.tensor(group.lengths)
    assert size == group_case.group_size and width == int(lengths.max())
    assert torch.equal(group.mask, (torch.arange(width) < lengths.unsqueeze(1)).to(torch.float64))  # right padding
    on = group.mask.bool()
    assert bool((group.ids[:, group.prompt_length:][~on] == TOKEN_ID[PAD]).all())  # <pad> where the mask is 0
    assert (group.logp - group.logp_old)[on].abs().max() > 0.2  # pi is not pi_old
    assert (group.logp_ref - group.logp_old)[on].abs().max() > 0.05  # pi_ref is neither (KL in the reward > 0)
    assert bool((len(set(group.rewards.tolist())) == 1) == group_case.all_equal)
    verl = GRPOParams(preset="verl")
    step, _ = app_step(group, verl)
    if not group_case.all_equal:
        assert bool(step.clip_active.any()), "no token clips"
    assert bool(step.dual_clip_hit.any()) == group_case.dual_clip_hit
    rows = token_rows(group, verl, step)
    assert any(r["kl_clamped"] for r in rows.samples) == group_case.kl_clamp_hit


def test_the_groups_are_ragged_and_varied():
    groups = [build_group(g) for g in GROUP_CASES]
    assert {g.case.group_size for g in groups} == {4, 8, 16}
    assert sum(min(g.lengths) < max(g.lengths) for g in groups) >= len(groups) - 1  # one all-equal group is not
    # the language part changes some rewards (a share, not only 0/1 sums)
    assert any(not float(r).is_integer() for g in groups for r in g.rewards)


def compared(test_gaps) -> set[tuple[str, str]]:
    out = set()
    for g in GROUP_CASES:
        group = build_group(g)
        for c in CONVENTION_CASES:
            params = grpo_params(c)
            step, _ = app_step(group, params)
            if not test_gaps(token_rows(group, params, step)):
                out.add((g.id, c.id))
    return out


def test_the_spread_reaches_what_it_claims():
    """Every preset under every aggregation is compared with each framework on some real group, and
    so are the steps where verl's dual clip and KL clamp bind (verl), the all-equal groups, and TRL's
    KL term with and without its bias correction."""
    by_trl, by_verl = compared(trl_loss_gaps), compared(loss_gaps)
    for pairs, name in ((by_trl, "TRL"), (by_verl, "verl")):
        for preset in PRESET_NAMES:
            for agg in AGGREGATIONS:
                if name == "TRL" and preset == "cispo" and agg != "token_mean":
                    continue  # TRL's cispo aggregates by the token mean only (loss_types)
                assert any(c == f"{preset}-{agg}" for _, c in pairs), f"{name}: {preset}-{agg} never compared"
        assert ("G4-p7-s9-all-equal", "deepseekmath-sample_mean") in pairs
    for conv_id in ("verl-token_mean", "verl-sample_mean", "verl-kl-reward-k3", "verl-kl-k1", "verl-kl-k2"):
        assert ("G16-p7-s1-lang-dual-clip", conv_id) in by_verl
        assert ("G8-p1-s0-big-step", conv_id) in by_verl
    assert ("G16-p7-s1-lang-dual-clip", "verl-token_mean") not in by_trl  # TRL has no dual clip
    for conv_id in ("trl-beta0.04-token_mean", "trl-beta0.04-no-bias-correction", "deepseekmath-sample-std"):
        assert ("G16-p2-s1", conv_id) in by_trl
    # the 2026 conventions, compared where they bite: GSPO's band clips some completions and not others,
    # CISPO's cap binds, and every IS mode's bound binds (TRL: all four, both bound pairs; verl: its two)
    bites = {"gspo-eps0.2": "clip_active", "trl-sequence-beta0.04": "clip_active", "cispo-cap1.2": "clip_high",
             "cispo-cap1.2-beta0.04": "clip_high", **{f"trl-is-{m}": "is_bound_hit" for m in IS_MODES},
             **{f"trl-is-{m}-0.5-2": "is_bound_hit" for m in IS_MODES}, "verl-sequence": "clip_active",
             "verl-cispo-cap1.2": "clip_high", "cispo-cap1.2-sample_mean": "clip_high",
             "verl-is-token_truncate": "is_bound_hit", "verl-is-sequence_mask-0.5-2": "is_bound_hit"}
    verl_only = {"verl-sequence", "verl-cispo-cap1.2", "cispo-cap1.2-sample_mean", "verl-is-token_truncate",
                 "verl-is-sequence_mask-0.5-2"}
    trl_only = {"trl-sequence-beta0.04", "cispo-cap1.2-beta0.04", *(f"trl-is-{m}" for m in IS_MODES),
                *(f"trl-is-{m}-0.5-2" for m in IS_MODES)}
    for conv_id, flag in bites.items():
        case = next(c for c in CONVENTION_CASES if c.id == conv_id)
        bitten = set()
        for g in GROUP_CASES:
            step, _ = app_step(build_group(g), grpo_params(case))
            if bool(getattr(step, flag).any()) and (flag != "clip_active" or not bool(step.clip_active.all())):
                bitten.add(g.id)
        for pairs, name, skip in ((by_trl, "TRL", verl_only), (by_verl, "verl", trl_only)):
            if conv_id not in skip:
                assert any((g, conv_id) in pairs for g in bitten), f"{name}: {conv_id} never compared where {flag}"


SWAPS = {
    # computed per token where the case asks for the sequence ratio (GSPO)
    "gspo-eps0.2": ("policy_log_ratio", lambda real: lambda lp, lo, mask, level, bound: real(lp, lo, mask, "token",
                                                                                              bound)),
    # CISPO's cap read as 1 + eps_high (the clip band's top), not TRL's absolute eps_high
    "cispo-cap1.2": ("cispo_surrogate", lambda real: lambda ratio, adv, logp, cap: real(ratio, adv, logp, 1 + cap)),
    # an IS correction dropped, truncation taken for masking, the sequence's weight for the tokens'
    "trl-is-token_truncate": ("is_weights", lambda real: lambda old, samp, mask, mode, lo, hi: real(
        old, samp, mask, "token_mask", lo, hi)),
    "trl-is-sequence_mask": ("is_weights", lambda real: lambda old, samp, mask, mode, lo, hi: real(
        old, samp, mask, "token_mask", lo, hi)),
    "verl-is-token_truncate": ("is_weights", lambda real: lambda old, samp, mask, mode, lo, hi: conv.ISWeights(
        mask.clone(), torch.zeros_like(mask, dtype=torch.bool))),
}


@pytest.mark.parametrize("case_id", list(SWAPS))
def test_a_swapped_new_convention_is_caught(case_id, monkeypatch, tmp_path):
    """Mutation test of the 2026 conventions: with one computed the wrong way in the app, TRL and verl
    (each where it expresses the case) disagree on a real ragged group, in the loss or the per-token
    gradient, far beyond the tolerance."""
    group = build_group(next(g for g in GROUP_CASES if g.id == "G16-p2-s1"))
    case = next(c for c in CONVENTION_CASES if c.id == case_id)
    params = grpo_params(case)
    name, wrong = SWAPS[case_id]
    monkeypatch.setattr(conv, name, wrong(getattr(conv, name)))
    frameworks = 0
    if loss_types(params) and not trl_loss_gaps(token_rows(group, params, app_step(group, params)[0])):
        step, grad, _, trl_loss, trl_grad = run_trl(tmp_path, group, case, loss_types(params)[0])
        assert max(relative_difference(trl_loss, step.loss), relative_difference(trl_grad, grad)) > 1e-4
        frameworks += 1
    step, grad = app_step(group, params)
    if not loss_gaps(token_rows(group, params, step)):
        logp = group.logp.clone().requires_grad_(True)
        advantages = verl_group_advantages(group, params).batch["advantages"]
        verl_loss_ = verl_actor_loss(actor_config(params, len(group.rewards)), logp, group.logp_old, group.logp_ref,
                                     advantages, group.mask, prompt_length=group.prompt_length,
                                     rollout_is_weights=verl_is_weights(params, group.logp_old, group.logp_sampling,
                                                                        group.mask))
        assert max(relative_difference(verl_loss_, step.loss), relative_difference(logp.grad, grad)) > 1e-4
        frameworks += 1
    assert frameworks >= 1, "neither framework compared the swapped case"


def test_a_swapped_aggregation_is_caught(monkeypatch, tmp_path):
    """Mutation test: with the app's sample_mean computed as token_mean, both frameworks disagree on a
    ragged group, in the loss and in the per-token gradient, far beyond the tolerance."""
    group_case = next(g for g in GROUP_CASES if g.id == "G16-p2-s1")
    case = next(c for c in CONVENTION_CASES if c.id == "deepseekmath-sample_mean")
    group = build_group(group_case)  # before the patch: pi is trained with the real aggregation
    params = grpo_params(case)
    real = conv.aggregate

    def swapped(per_token, mask, mode, max_length):
        return real(per_token, mask, "token_mean" if mode == "sample_mean" else mode, max_length)

    monkeypatch.setattr(conv, "aggregate", swapped)
    step, grad, _, trl_loss, trl_grad = run_trl(tmp_path, group, case, "grpo")
    logp = group.logp.clone().requires_grad_(True)
    verl_loss_ = verl_actor_loss(actor_config(params, len(group.rewards)), logp, group.logp_old, group.logp_ref,
                                 broadcast(step.advantages, group), group.mask, prompt_length=group.prompt_length)
    for got, want in ((trl_loss, step.loss), (trl_grad, grad), (verl_loss_, step.loss), (logp.grad, grad)):
        assert relative_difference(got, want) > 1e-4
