"""The app's side of the token-level peer tests (issue 13): real groups from the tiny LM, padded.

Each `GroupCase` samples G completions of one seeded prompt from the shipped base checkpoint with
`sample_group` (ragged lengths, right padding, a 0/1 mask), scores them with the task's rule
rewards, and computes three (G, T) per-token log-prob tensors with the model's own
`completion_logprobs`:

- log pi_old: the base checkpoint, which sampled the group;
- log pi_ref: the base with its weights perturbed (seeded Gaussian noise), so the KL is not 0
  and a KL in the reward (computed from pi_old) is not 0 either;
- log pi: the base after a few AdamW steps of the app's own `token_grpo_step` loss on that group
  (DeepSeekMath conventions), so ratios differ from 1 and some tokens clip;
- log pi_sampling, the rollout engine's log-probs (vLLM's, for TRL's IS correction): log pi_old plus
  seeded Gaussian noise (std 0.6) on the real tokens, so that exp(log pi_old - log pi_sampling) exceeds TRL's
  clip max of 3 on some tokens and, summed over a completion, on many sequences (and falls below 0.5 on others).

The tests feed exactly these padded tensors (padding positions included, as the model computed
them) to the app's `token_grpo_step` and to TRL's and verl's own functions. `TokenRows` shows a
token step to the gap functions of peers/test_trl.py and peers/test_verl.py (written for the toy's
samples) as one row per real token, so both levels skip for the same reasons.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from app.engine.grpo import objective as conv
from app.engine.grpo.params import Conventions
from app.engine.grpo.presets import PRESET_NAMES
from app.engine.grpo.token_step import TokenStep, token_grpo_step
from app.kinds.tiny_lm.domain import arith_task
from app.kinds.tiny_lm.engine.base_training import load_base
from app.kinds.tiny_lm.engine.lm_sampling import sample_group
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM, completion_logprobs
from app.kinds.toy.engine.params import GRPOParams

BASE_CHECKPOINT = Path(__file__).resolve().parents[1] / "walkthroughs" / "models" / "tiny_lm_base.safetensors"
MAX_NEW = 24  # sampling limit, and the constant of token_sum_norm (TRL's max_completion_length)
PROMPTS = arith_task.make_prompts(8, seed=0)
ACCURACY_FORMAT = ("accuracy", "format")
WITH_LANGUAGE = ("accuracy", "format", "language")
# How pi is made from the base: the paper's conventions, on the group's own rewards
TRAINING = Conventions(preset="deepseekmath")
AGGREGATIONS = ("sample_mean", "token_mean", "token_sum_norm")
SAMPLING_NOISE = 0.6  # std of log pi_sampling - log pi_old on each real token
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass(frozen=True)
class GroupCase:
    id: str
    prompt: int  # index into PROMPTS
    group_size: int
    seed: int  # sample_group's seed
    parts: tuple[str, ...] = ACCURACY_FORMAT  # which reward parts are summed
    policy_steps: int = 2  # AdamW steps from the base to pi
    learning_rate: float = 1e-4
    reference_noise: float = 0.005  # std of the noise added to every base weight for pi_ref
    policy_noise: float = 0.0  # std of the noise added to pi's weights after its AdamW steps
    # what the case is there for; test_token_level.py::test_the_groups_are_what_they_claim checks it
    all_equal: bool = False  # every reward the same
    dual_clip_hit: bool = False  # verl's dual clip (c = 3) binds on some token
    kl_clamp_hit: bool = False  # k3 of pi against pi_ref exceeds verl's clamp (10) on some token


GROUP_CASES: tuple[GroupCase, ...] = (
    GroupCase("G4-p0-s0", prompt=0, group_size=4, seed=0, policy_steps=1),
    GroupCase("G4-p5-s2-lang", prompt=5, group_size=4, seed=2, parts=WITH_LANGUAGE, policy_steps=3),
    GroupCase("G8-p1-s0", prompt=1, group_size=8, seed=0),
    GroupCase("G8-p6-s1-lang", prompt=6, group_size=8, seed=1, parts=WITH_LANGUAGE),
    GroupCase("G16-p2-s1", prompt=2, group_size=16, seed=1, policy_steps=3),
    # a noisier pi: ratios above 3 on tokens with A < 0, so verl's dual clip (c = 3) binds
    GroupCase("G16-p7-s1-lang-dual-clip", prompt=7, group_size=16, seed=1, parts=WITH_LANGUAGE, policy_steps=1,
              policy_noise=0.02, dual_clip_hit=True),
    # a big step: pi far from pi_ref, k3 above verl's hard-coded clamp of 10
    GroupCase("G8-p1-s0-big-step", prompt=1, group_size=8, seed=0, learning_rate=1e-3, policy_noise=0.01,
              kl_clamp_hit=True),
    # all rewards equal: A = 0, only the KL term is left (ragged: 13, 13, 12, 13 tokens)
    GroupCase("G4-p7-s9-all-equal", prompt=7, group_size=4, seed=9, all_equal=True),
    GroupCase("G4-p0-s1-all-equal", prompt=0, group_size=4, seed=1, all_equal=True),
)


@dataclass(frozen=True)
class TokenGroup:
    case: GroupCase
    ids: torch.Tensor  # (G, P + T) prompt + right-padded completions
    prompt_length: int
    completions: tuple[str, ...]
    mask: torch.Tensor  # (G, T) float64 0/1
    rewards: torch.Tensor  # (G,) float64
    logp: torch.Tensor  # (G, T) log pi, padding positions included
    logp_old: torch.Tensor
    logp_ref: torch.Tensor
    logp_sampling: torch.Tensor  # the rollout engine's; padding positions hold 0 (as TRL pads them)

    @property
    def lengths(self) -> list[int]:
        return [int(n) for n in self.mask.sum(-1)]


@functools.cache
def base_model() -> TinyLM:
    return load_base(BASE_CHECKPOINT)


@torch.no_grad()
def _logprobs(model: TinyLM, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
    return completion_logprobs(model, ids, prompt_length).detach()


@functools.cache
def build_group(case: GroupCase) -> TokenGroup:
    base = base_model()
    prompt = PROMPTS[case.prompt]
    group = sample_group(base, arith_task.encode(prompt.text), case.group_size, MAX_NEW, case.seed)
    ids, length = group.ids, group.prompt_length
    mask = group.mask.to(torch.float64)
    rewards = torch.tensor([arith_task.rewards(prompt, c).total(case.parts) for c in group.completions],
                           dtype=torch.float64)
    logp_old = _logprobs(base, ids, length)

    reference = copy.deepcopy(base)
    gen = torch.Generator().manual_seed(10_000 + case.seed)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * case.reference_noise)
    logp_ref = _logprobs(reference, ids, length)

    policy = copy.deepcopy(base).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=case.learning_rate)
    for _ in range(case.policy_steps):
        loss = token_grpo_step(completion_logprobs(policy, ids, length), logp_old, logp_ref, rewards, mask,
                               TRAINING).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if case.policy_noise:
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * case.policy_noise)
    logp = _logprobs(policy.eval(), ids, length)
    rollout = torch.Generator().manual_seed(20_000 + case.seed)
    logp_sampling = (logp_old + torch.randn(logp_old.shape, generator=rollout, dtype=torch.float64)
                     * SAMPLING_NOISE) * mask
    return TokenGroup(case, ids, length, tuple(group.completions), mask, rewards, logp, logp_old, logp_ref,
                      logp_sampling)


# --- conventions ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConventionCase:
    id: str
    params: dict
    advantages: bool = False  # also compare advantages (they do not depend on the aggregation)


def _params(params: dict) -> dict:
    return {"max_length": MAX_NEW, **params}


CONVENTION_CASES: tuple[ConventionCase, ...] = (
    # every preset under each of the three aggregations (its own one marked as the advantage case)
    *(ConventionCase(f"{preset}-{agg}", _params({"preset": preset, "loss_aggregation": agg}),
                     advantages=agg == GRPOParams(preset=preset).loss_aggregation)
      for preset in PRESET_NAMES for agg in AGGREGATIONS),
    # TRL with its KL term switched on (with and without TRL's bias correction)
    *(ConventionCase(f"trl-beta0.04-{agg}", _params({"preset": "trl", "beta": 0.04, "loss_aggregation": agg}))
      for agg in AGGREGATIONS),
    ConventionCase("trl-beta0.04-no-bias-correction", _params({"preset": "trl", "beta": 0.04,
                                                               "kl_bias_correction": False})),
    # the paper's conventions with Bessel std and TRL's 1e-4, so TRL's own advantages are compared too
    ConventionCase("deepseekmath-sample-std", _params({"advantage_std": "sample"}), advantages=True),
    # verl's other KL estimators in the loss, and its KL in the reward (summed over each completion's tokens)
    *(ConventionCase(f"verl-kl-{k}", _params({"preset": "verl", "kl_estimator": k, "beta": 0.04}))
      for k in ("k1", "k2")),
    *(ConventionCase(f"verl-kl-reward-{k}", _params({"preset": "verl", "kl_placement": "reward", "kl_estimator": k,
                                                     "beta": 0.1}), advantages=True)
      for k in ("k1", "k3")),
    ConventionCase("dr_grpo-beta0.04", _params({"preset": "dr_grpo", "beta": 0.04})),
    # the 2026 conventions (issue 23). GSPO's sequence ratio with a band that clips some completions, not all,
    # with TRL's KL term (x the sequence ratio), and under verl's preset (verl: loss_mode gspo)
    ConventionCase("gspo-eps0.2", _params({"preset": "gspo", "clip_epsilon": 0.2})),
    *(ConventionCase(f"gspo-eps0.2-{agg}", _params({"preset": "gspo", "clip_epsilon": 0.2, "loss_aggregation": agg}))
      for agg in ("token_mean", "token_sum_norm")),
    ConventionCase("trl-sequence-beta0.04", _params({"preset": "trl", "importance_sampling_level": "sequence",
                                                     "beta": 0.04})),
    ConventionCase("verl-sequence", _params({"preset": "verl", "importance_sampling_level": "sequence"})),
    # CISPO with a cap some ratios pass (TRL's 5 binds nowhere here), with TRL's KL term, and under verl's
    # preset (verl: loss_mode cispo, clip_ratio_high = cap - 1, no lower bound)
    ConventionCase("cispo-cap1.2", _params({"preset": "cispo", "clip_epsilon_high": 1.2})),
    ConventionCase("cispo-cap1.2-beta0.04", _params({"preset": "cispo", "clip_epsilon_high": 1.2, "beta": 0.04})),
    ConventionCase("cispo-cap1.2-sample_mean", _params({"preset": "cispo", "clip_epsilon_high": 1.2,
                                                        "loss_aggregation": "sample_mean"})),
    ConventionCase("verl-cispo-cap1.2", _params({"preset": "verl", "policy_loss": "cispo", "clip_epsilon_high": 1.2})),
    # TRL's vLLM IS correction, each mode: TRL's default bounds (none, 3), then [0.5, 2]
    *(ConventionCase(f"trl-is-{m}", _params({"preset": "trl", "is_correction": m})) for m in IS_MODES),
    *(ConventionCase(f"trl-is-{m}-0.5-2", _params({"preset": "trl", "is_correction": m, "is_clip_min": 0.5,
                                                   "is_clip_max": 2.0, "beta": 0.04})) for m in IS_MODES),
    ConventionCase("gspo-eps0.2-is-sequence_mask", _params({"preset": "gspo", "clip_epsilon": 0.2,
                                                            "is_correction": "sequence_mask"})),
    ConventionCase("cispo-cap1.2-is-token_truncate", _params({"preset": "cispo", "clip_epsilon_high": 1.2,
                                                              "is_correction": "token_truncate"})),
    ConventionCase("verl-is-token_truncate", _params({"preset": "verl", "is_correction": "token_truncate"})),
    ConventionCase("verl-is-sequence_mask-0.5-2", _params({"preset": "verl", "is_correction": "sequence_mask",
                                                           "is_clip_min": 0.5, "is_clip_max": 2.0})),
)


def grpo_params(case: ConventionCase) -> GRPOParams:
    """The conventions as a GRPOParams, which the frameworks' config builders read. mu = 2: pi_old is
    a separate policy (TRL computes old log-probs only with num_iterations > 1)."""
    return GRPOParams(**case.params, inner_steps=2, inner_step=1)


def app_step(group: TokenGroup, conventions: Conventions) -> tuple[TokenStep, torch.Tensor]:
    """The app's token-level step on the group, and d loss / d logp (G, T) from autograd on a leaf."""
    logp = group.logp.clone().requires_grad_(True)
    step = token_grpo_step(logp, group.logp_old, group.logp_ref, group.rewards, group.mask, conventions,
                           logp_sampling=group.logp_sampling)
    step.loss.backward()
    return step, logp.grad


@dataclass(frozen=True)
class TokenRows:
    """A token step as the toy's StepResult looks to the gap functions: `params` and `samples`, one
    row per real (unpadded) token with the columns and flags they read."""
    params: GRPOParams
    samples: list[dict]
    sequence_log_ratio: torch.Tensor  # (G,) each completion's mean log pi - log pi_old (GSPO's, before a clamp)
    log_is_ratio: torch.Tensor | None  # the IS correction's log-ratios: per token, or per sequence (summed)


def token_rows(group: TokenGroup, params: GRPOParams, step: TokenStep) -> TokenRows:
    c = params
    on = group.mask.bool()
    kl_logp = group.logp_old if c.kl_placement == "reward" else group.logp
    kl = conv.kl_estimate(kl_logp, group.logp_ref, c.kl_estimator, c.log_ratio_clamp, c.kl_clamp)
    columns = {
        "logp": group.logp, "logp_old": group.logp_old, "logp_ref": group.logp_ref,
        "divergence": step.kl.detach(),  # the app's estimate (after its clamps), of pi_old with the KL in the reward
        "dual_clip_hit": step.dual_clip_hit, "clip_active": step.clip_active,
        "ratio_clamped": conv.policy_log_ratio(group.logp, group.logp_old, group.mask, c.importance_sampling_level,
                                               c.log_ratio_clamp)[1].expand_as(on),
        "clip_high": step.clip_high, "is_bound_hit": step.is_bound_hit,
        "kl_log_ratio_clamped": kl.log_ratio_clamped, "kl_clamped": kl.kl_clamped,
    }
    rows = [{name: (bool(t[i, j]) if t.dtype == torch.bool else float(t[i, j])) for name, t in columns.items()}
            for i, j in on.nonzero().tolist()]
    sequence = conv.policy_log_ratio(group.logp, group.logp_old, group.mask, "sequence", None)[0][:, 0]
    log_is = None
    if c.is_correction != "none":
        diff = (group.logp_old - group.logp_sampling) * group.mask
        log_is = diff.sum(-1) if c.is_correction.startswith("sequence") else diff[on]
    return TokenRows(params, rows, sequence, log_is)
