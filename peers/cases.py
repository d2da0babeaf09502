"""The app's side of the peer tests: which GRPO steps to run, and how agreement is measured.

Every case is a `GRPOParams` the app runs with `run_grpo_step`; the tests feed its recorded
samples (log pi, log pi_old, log pi_ref, rewards, actions) to TRL's and verl's own functions
and compare what those return with what the app recorded: advantages, the loss, and
d loss / d log pi(c) (the `policy` node's grad, shape (1, 4)).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch

from app.engine.grpo.presets import PRESET_NAMES
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.step import run_grpo_step

RTOL = 1e-9  # |a - b| <= RTOL * max(1, |b|), b the app's number
N_CHOICES = 4


@dataclass(frozen=True)
class Case:
    id: str
    params: dict
    # flags of `result.samples` that must be true for at least one sample: the case tests these
    # (dual clip, clamps...), so it must not silently stop reaching them
    hits: tuple[str, ...] = ()


ONE_OF_EIGHT = (1, 0, 0, 0, 0, 0, 0, 0)
# Found by a search over learning_rate / inner_step / rewards: big early steps on a small group.
DUAL_CLIP_HIT = dict(seed=0, iteration=0, inner_step=1, learning_rate=3, rewards=ONE_OF_EIGHT)
CLAMPS_HIT = dict(seed=0, iteration=0, inner_step=1, learning_rate=10, advantage_std="none", rewards=(10, 0, 0, 0))

CASES: tuple[Case, ...] = (
    # every preset as it stands
    *(Case(f"preset-{name}", {"preset": name}) for name in PRESET_NAMES),
    # presets whose beta is 0, with a KL term switched on
    Case("trl-beta0.04", {"preset": "trl", "beta": 0.04}),
    Case("trl-beta0.04-no-bias-correction", {"preset": "trl", "beta": 0.04, "kl_bias_correction": False}),
    Case("dr_grpo-beta0.04", {"preset": "dr_grpo", "beta": 0.04}),
    Case("dapo-beta0.04", {"preset": "dapo", "beta": 0.04}),
    Case("deepseekmath-bias-correction", {"kl_bias_correction": True}),
    # advantage std and its epsilon
    Case("std-sample", {"advantage_std": "sample"}),
    Case("std-sample-eps1e-6", {"advantage_std": "sample", "advantage_epsilon": 1e-6}),
    Case("std-population", {"advantage_std": "population"}),
    Case("std-none", {"advantage_std": "none"}),
    Case("verl-std-none", {"preset": "verl", "advantage_std": "none"}),
    Case("trl-std-none", {"preset": "trl", "advantage_std": "none"}),
    # the clip band
    Case("clip-high-0.28", {"advantage_std": "sample", "clip_epsilon_high": 0.28}),
    Case("trl-clip-high-0.28", {"preset": "trl", "clip_epsilon_high": 0.28, "beta": 0.04}),
    Case("clip-0.1", {"advantage_std": "sample", "clip_epsilon": 0.1}),
    # KL estimators, in the loss
    *(Case(f"kl-{k}", {"advantage_std": "sample", "kl_estimator": k, "beta": 0.04}) for k in ("k1", "k2", "k3")),
    *(Case(f"kl-{k}-beta0.5", {"kl_estimator": k, "beta": 0.5}) for k in ("k1", "k2", "k3")),
    *(Case(f"verl-kl-{k}", {"preset": "verl", "kl_estimator": k, "beta": 0.04}) for k in ("k1", "k2", "k3")),
    # KL in the reward (PPO-style RLHF; verl's use_kl_in_reward)
    *(Case(f"kl-reward-{k}", {"advantage_std": "sample", "kl_placement": "reward", "kl_estimator": k, "beta": 0.1})
      for k in ("k1", "k2", "k3")),
    Case("verl-kl-reward-k3", {"preset": "verl", "kl_placement": "reward", "beta": 0.1}),
    Case("verl-kl-reward-k1-eps1e-4", {"preset": "verl", "kl_placement": "reward", "kl_estimator": "k1",
                                       "beta": 0.2, "advantage_epsilon": 1e-4}),
    # aggregation
    Case("agg-token-mean", {"advantage_std": "sample", "loss_aggregation": "token_mean"}),
    Case("agg-token-sum-norm", {"advantage_std": "sample", "loss_aggregation": "token_sum_norm"}),
    Case("agg-token-sum-norm-L7", {"advantage_std": "sample", "loss_aggregation": "token_sum_norm",
                                   "max_length": 7}),
    Case("dr_grpo-L16", {"preset": "dr_grpo", "max_length": 16, "beta": 0.04}),
    Case("trl-sample-mean", {"preset": "trl", "loss_aggregation": "sample_mean", "beta": 0.04}),
    Case("verl-sample-mean", {"preset": "verl", "loss_aggregation": "sample_mean"}),
    Case("verl-token-sum-norm-L3", {"preset": "verl", "loss_aggregation": "token_sum_norm", "max_length": 3}),
    # reward overrides: all equal (A = 0), one correct of eight, continuous rewards
    *(Case(f"{p}-all-equal", {"preset": p, "rewards": (1, 1, 1, 1), "beta": 0.04})
      for p in ("deepseekmath", "trl", "verl")),
    Case("all-zero-of-eight", {"advantage_std": "sample", "rewards": (0,) * 8}),
    *(Case(f"{p}-one-of-eight", {"preset": p, "rewards": ONE_OF_EIGHT}) for p in PRESET_NAMES),
    Case("trl-continuous", {"preset": "trl", "rewards": (0.3, -1.2, 2.5, 0.0, 0.7), "beta": 0.04}),
    Case("verl-continuous", {"preset": "verl", "rewards": (0.3, -1.2, 2.5, 0.0, 0.7)}),
    Case("dr_grpo-continuous", {"preset": "dr_grpo", "rewards": (0.3, -1.2, 2.5, 0.0, 0.7, 4.0)}),
    # seeds and group sizes
    *(Case(f"seed{s}-G{g}-{p}", {"preset": p, "seed": s, "group_size": g})
      for s, g, p in ((0, 2, "trl"), (1, 3, "verl"), (7, 5, "deepseekmath"), (123, 16, "trl"), (3, 16, "verl"),
                      (11, 12, "dapo"), (5, 4, "dr_grpo"), (2, 2, "verl"), (9, 6, "deepseekmath"))),
    Case("seed4-G16-trl-beta", {"preset": "trl", "seed": 4, "group_size": 16, "beta": 0.04, "iteration": 5}),
    # the first update: rho = 1 exactly, no clip, D = 0
    *(Case(f"{p}-first-update", {"preset": p, "iteration": 0, "inner_step": 0, "beta": 0.04}) for p in ("trl", "verl")),
    # a long history
    Case("trl-iteration20", {"preset": "trl", "iteration": 20, "beta": 0.04, "learning_rate": 1}),
    Case("verl-iteration20", {"preset": "verl", "iteration": 20, "learning_rate": 1}),
    # the dual clip binds (A < 0, rho > c)
    Case("verl-dual-clip-hit", {"preset": "verl", **DUAL_CLIP_HIT}, hits=("dual_clip_hit",)),
    Case("deepseekmath-dual-clip3-hit", {"advantage_std": "sample", "dual_clip": 3.0, **DUAL_CLIP_HIT},
         hits=("dual_clip_hit",)),
    Case("no-dual-clip-same-step", {"advantage_std": "sample", **DUAL_CLIP_HIT}),
    # verl's clamps bind: log-ratio beyond ±20 (policy/old and ref/policy), k3 above 10
    Case("verl-clamps-hit", {"preset": "verl", "beta": 0.04, **CLAMPS_HIT},
         hits=("ratio_clamped", "kl_log_ratio_clamped", "kl_clamped", "dual_clip_hit")),
    Case("verl-kl-clamp-hit", {"preset": "verl", "seed": 0, "iteration": 0, "inner_step": 1, "learning_rate": 10,
                               "rewards": (0, 10, 0, 0), "beta": 0.04}, hits=("kl_clamped",)),
    Case("dapo-clamps-hit", {"preset": "dapo", **CLAMPS_HIT}, hits=("ratio_clamped",)),
    # k2 far past verl's k3 bounds (|Δ| > 20, Δ²/2 > 10): neither the app nor verl clamps k1 or k2
    Case("verl-kl-k2-unclamped", {"preset": "verl", "seed": 0, "iteration": 0, "inner_step": 1,
                                  "learning_rate": 10, "rewards": (0, 10, 0, 0), "beta": 0.04, "kl_estimator": "k2"}),
    # the same extreme steps without any clamp: TRL computes what the app computes
    Case("no-clamps-extreme", {"seed": 0, "advantage_std": "none", "beta": 0.0, "iteration": 0, "inner_step": 1,
                               "learning_rate": 3, "rewards": (10, 0, 0, 0)}),
    # the 2026 conventions (issue 23) on one-token completions: a sequence ratio is the token's, CISPO's cap
    # binds where a ratio passes it with A > 0, and an IS correction weighs 1 (pi_old sampled the group)
    Case("trl-sequence-beta0.04", {"preset": "trl", "importance_sampling_level": "sequence", "beta": 0.04}),
    Case("gspo-eps0.2", {"preset": "gspo", "clip_epsilon": 0.2}, hits=("clip_active",)),
    Case("verl-sequence", {"preset": "verl", "importance_sampling_level": "sequence"}),
    Case("cispo-cap1.1-beta0.04", {"preset": "cispo", "clip_epsilon_high": 1.1, "beta": 0.04, "seed": 3,
                                   "iteration": 1, "inner_step": 3}, hits=("clip_active",)),
    Case("cispo-cap1.1-one-of-eight", {"preset": "cispo", "clip_epsilon_high": 1.1, "seed": 0, "iteration": 0,
                                       "inner_step": 1, "learning_rate": 1, "rewards": ONE_OF_EIGHT},
         hits=("clip_active",)),
    Case("verl-cispo-cap1.2", {"preset": "verl", "policy_loss": "cispo", "clip_epsilon_high": 1.2}),
    Case("cispo-dual-clip-step", {"preset": "cispo", "clip_epsilon_high": 1.5, "advantage_std": "sample",
                                  **DUAL_CLIP_HIT}),
    *(Case(f"trl-is-{m}", {"preset": "trl", "is_correction": m, "beta": 0.04})
      for m in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")),
)


def run_case(case: Case) -> StepResult:
    return run_grpo_step(GRPOParams(**case.params))


def column(result: StepResult, name: str) -> torch.Tensor:
    """One column of the samples table as a float64 (G,) tensor (int64 for `action`)."""
    values = [s[name] for s in result.samples]
    if name == "action":
        return torch.tensor(values, dtype=torch.int64)
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


def any_flag(result: StepResult, name: str) -> bool:
    return any(bool(s[name]) for s in result.samples)


def app_policy_grad(result: StepResult) -> torch.Tensor:
    """d loss / d log pi(c), shape (1, 4), as the app recorded it on its `policy` node."""
    return torch.tensor(result.nodes["policy"].grad, dtype=torch.float64)


def scatter_by_action(per_sample: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """(G,) or (G, 1) d loss / d logp_i -> (1, 4) d loss / d log pi(c): logp_i = log pi(a_i), so
    the gradients of samples that chose the same answer add up (the app's indexing backward)."""
    out = torch.zeros(1, N_CHOICES, dtype=torch.float64)
    return out.index_add(1, actions, per_sample.reshape(1, -1).to(torch.float64))


@dataclass
class Agreement:
    """Max relative difference seen per (framework, quantity); filled by `agree`, printed by conftest."""
    worst: dict = field(default_factory=lambda: defaultdict(lambda: (0.0, "")))
    compared: dict = field(default_factory=lambda: defaultdict(int))

    def record(self, framework: str, quantity: str, rel: float, where: str) -> None:
        key = (framework, quantity)
        self.compared[key] += 1
        if rel >= self.worst[key][0]:
            self.worst[key] = (rel, where)


AGREEMENT = Agreement()
# The token-level tests (test_token_level.py) also record here, keyed (framework, the app's loss_aggregation
# or "advantages"): the summary's per-aggregation figures.
TOKEN_AGREEMENT = Agreement()


def relative_difference(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().to(torch.float64).reshape(-1), want.detach().to(torch.float64).reshape(-1)
    assert got.shape == want.shape, f"shapes differ: {tuple(got.shape)} vs {tuple(want.shape)}"
    if got.numel() == 0:
        return 0.0
    return float(((got - want).abs() / want.abs().clamp(min=1.0)).max())


def agree(framework: str, quantity: str, where: str, got, want, rtol: float = RTOL) -> float:
    """Assert |got - want| <= rtol * max(1, |want|) elementwise (want: the app's number) and record it."""
    got = torch.as_tensor(got, dtype=torch.float64)
    want = torch.as_tensor(want, dtype=torch.float64)
    assert torch.isfinite(got).all() and torch.isfinite(want).all(), f"{framework} {quantity} {where}: not finite"
    rel = relative_difference(got, want)
    AGREEMENT.record(framework, quantity, rel, where)
    assert rel <= rtol, (f"{framework} disagrees with the app on {quantity} in {where}: "
                         f"relative difference {rel:.3e} > {rtol:g}\n  {framework}: {got.tolist()}\n"
                         f"  app: {want.tolist()}")
    return rel


def fmt(rel: float) -> str:
    return "0" if rel == 0 else f"{rel:.1e}"
