"""Named sets of GRPO conventions, each read from its source (versions pinned in the peer tests).

A preset fills every convention it names; a parameter given explicitly overrides it.
The sources (file, version) are cited in docs/design.md §3 and docs/reference/step-parameters.md ("Presets").
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Final

PRESET_NAMES = ("deepseekmath", "trl", "verl", "dr_grpo", "dapo", "gspo", "cispo")
DEFAULT_PRESET: Final = "deepseekmath"

_BASE = {
    "advantage_std": "population", "advantage_epsilon": 1e-4,
    "clip_epsilon": 0.2, "dual_clip": None,
    "beta": 0.04, "kl_estimator": "k3", "kl_placement": "loss", "kl_bias_correction": False,
    "log_ratio_clamp": None, "kl_clamp": None,
    "loss_aggregation": "sample_mean",
    # the 2026 conventions, off: the clipped surrogate, per-token ratios, no IS correction
    # (TRL's GRPOConfig bounds: vllm_importance_sampling_clip_min None, _clip_max 3.0)
    "policy_loss": "clip", "importance_sampling_level": "token",
    "is_correction": "none", "is_clip_min": None, "is_clip_max": 3.0,
}
# clip_epsilon_high is named only where it differs (DAPO): otherwise it follows clip_epsilon,
# so `?clip_epsilon=0.3` alone moves both ends of the band.

PRESETS = MappingProxyType({
    # DeepSeekMath §4.1.1 eq. 3-4 as written: population std, ε = 0.2, β = 0.04, k3 in the
    # loss, mean over a completion's tokens then over the group.
    "deepseekmath": MappingProxyType(dict(_BASE)),
    # TRL 1.16.0, trl/trainer/grpo_config.py defaults and grpo_trainer.py: scale_rewards="group"
    # (nanstd: Bessel), + 1e-4 hard-coded, epsilon 0.2, epsilon_high = epsilon, beta 0.0,
    # use_bias_correction_kl=True (k3 × ρ), loss_type="dapo" (token mean).
    "trl": MappingProxyType({**_BASE, "advantage_std": "sample", "beta": 0.0,
                             "kl_bias_correction": True, "loss_aggregation": "token_mean"}),
    # verl 0.9.1, trainer/config/actor/actor.yaml + ppo_trainer.yaml + ppo/core_algos.py:
    # norm_adv_by_std_in_grpo (torch.std: Bessel) with epsilon 1e-6, clip_ratio 0.2/0.2,
    # clip_ratio_c 3 (dual clip), log-ratio clamped to ±20, kl_loss_type low_var_kl (k3, Δ
    # clamped to ±20, value to ±10), kl_loss_coef 0.001 (use_kl_loss is off by default; its
    # GRPO examples turn it on), loss_agg_mode token-mean.
    "verl": MappingProxyType({**_BASE, "advantage_std": "sample", "advantage_epsilon": 1e-6,
                              "dual_clip": 3.0, "beta": 0.001, "log_ratio_clamp": 20.0, "kl_clamp": 10.0,
                              "loss_aggregation": "token_mean"}),
    # Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): no std division, no
    # KL, token sums divided by a constant (TRL loss_type="dr_grpo", scale_rewards="none").
    "dr_grpo": MappingProxyType({**_BASE, "advantage_std": "none", "beta": 0.0,
                                 "loss_aggregation": "token_sum_norm"}),
    # DAPO (Yu et al. 2025) as its verl recipe runs it (recipe/dapo/run_dapo_qwen2.5_32b.sh):
    # clip-higher 0.2/0.28, clip_ratio_c 10, no KL, token-level loss, verl's std and clamp.
    "dapo": MappingProxyType({**_BASE, "advantage_std": "sample", "advantage_epsilon": 1e-6,
                              "clip_epsilon_high": 0.28, "dual_clip": 10.0, "beta": 0.0,
                              "log_ratio_clamp": 20.0, "loss_aggregation": "token_mean"}),
    # GSPO (Zheng et al. 2025) as TRL 1.16 documents it (docs/source/paper_index.md, "Group Sequence
    # Policy Optimization"): importance_sampling_level="sequence", loss_type="grpo" (sample_mean),
    # beta=0.0, epsilon=3e-4, epsilon_high=4e-4 (GSPO paper v2 §5.1); TRL's other defaults.
    "gspo": MappingProxyType({**_BASE, "advantage_std": "sample", "clip_epsilon": 3e-4, "clip_epsilon_high": 4e-4,
                              "beta": 0.0, "kl_bias_correction": True, "importance_sampling_level": "sequence"}),
    # CISPO (MiniMax-M1, Chen et al. 2025) as TRL 1.16 runs it: loss_type="cispo" (token mean over the
    # batch, grpo_trainer.py ~line 3168), epsilon_high=5.0 as an absolute cap on ρ (grpo_config.py
    # epsilon_high: "the recommended value is 5.0", after ScaleRL); TRL's other defaults (beta 0).
    "cispo": MappingProxyType({**_BASE, "advantage_std": "sample", "clip_epsilon_high": 5.0, "beta": 0.0,
                               "kl_bias_correction": True, "loss_aggregation": "token_mean",
                               "policy_loss": "cispo"}),
})

PRESET_TITLES = MappingProxyType({
    "deepseekmath": "DeepSeekMath paper", "trl": "TRL 1.16 defaults", "verl": "verl 0.9.1 GRPO",
    "dr_grpo": "Dr. GRPO", "dapo": "DAPO", "gspo": "GSPO (TRL 1.16)", "cispo": "CISPO (TRL 1.16)",
})
