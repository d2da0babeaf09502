"""UNIPO's `header.algorithm` and free-form `header.hparams` as a step record's `config` (unipo.py).

UNIPO names no aggregation or advantage normalisation: its explainer for each algorithm
(poloclub/unipo src/lib/algorithm-explainer/algorithms/<algorithm>.json) shows them, so they come
from there. Hyperparameter names are free-form in UNIPO, so each convention is looked up under the
names the frameworks use, UNIPO's documented one first.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from app.kinds.step_record.domain.arrays import describe

Fail = Callable[[str, str], NoReturn]  # (UNIPO path, message): raises

# UNIPO's explainers: grpo 1/N Σ 1/G Σ 1/|o_i| Σ_t, A = (R − mean)/std with Bessel's std (bindings.ts
# array_std); dapo 1/N Σ 1/Σ_i|o_i| Σ_i Σ_t; drgrpo 1/(N·G·L), A = R − mean. PPO (per-token GAE
# advantages and a value loss) and REINFORCE (log π·(R − b), no ratio) optimise other objectives.
ALGORITHMS = {"grpo": ("sample_mean", "sample"), "dapo": ("token_mean", "sample"),
              "drgrpo": ("token_sum_norm", "none"), "dr_grpo": ("token_sum_norm", "none")}
# hparams names, UNIPO's documented one first, then OpenRLHF's (UNIPO's own GRPO run), TRL's, verl's
BETA_KEYS = ("kl_coef", "init_kl_coef", "beta", "kl_loss_coef")
CLIP_KEYS = ("clip_eps", "eps_clip", "epsilon", "clip_ratio_low", "clip_ratio")
CLIP_HIGH_KEYS = ("epsilon_high", "clip_ratio_high")
ESTIMATOR_KEYS = ("kl_estimator", "kl_loss_type")
ESTIMATORS = {"k1": "k1", "k2": "k2", "k3": "k3", "kl": "k1", "mse": "k2", "low_var_kl": "k3"}
MAX_LENGTH_KEYS = ("generate_max_len", "max_completion_length", "max_response_length",
                   "response_length", "max_new_tokens")


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def first(hparams: dict, keys: tuple[str, ...]) -> tuple[str, Any] | None:
    return next(((k, hparams[k]) for k in keys if hparams.get(k) is not None), None)


def config_from_header(header: dict, hparams: dict, fail: Fail, notes: list[str],
                       paths: dict[str, str]) -> dict[str, Any]:
    """header.algorithm and header.hparams in the app's names; `paths` says where each came from."""
    h, at = hparams, "header.hparams"
    algorithm = header.get("algorithm")
    if not isinstance(algorithm, str):
        fail("header.algorithm", "missing" if algorithm is None else "must be a string")
    if algorithm.strip().lower() not in ALGORITHMS:
        fail("header.algorithm", f"{algorithm!r} is not a GRPO-family algorithm this reader knows "
                                    f"({', '.join(sorted(ALGORITHMS))}): its objective is not the clipped surrogate")
    aggregation, std = ALGORITHMS[algorithm.strip().lower()]
    config: dict[str, Any] = {"policy_loss": "clip", "loss_aggregation": aggregation, "advantage_std": std}
    read: list[str] = []
    assumed = [f"loss_aggregation {aggregation} and advantage_std {std} (UNIPO's {algorithm} explainer)"]
    if aggregation == "token_mean":  # UNIPO's dapo.json: each prompt's token mean, then the mean over prompts
        assumed.append("token_mean over all the step's tokens (UNIPO's DAPO averages each prompt's token mean: "
                       "the same for one prompt)")
    if (clip := first(h, CLIP_KEYS)) is not None:
        key, value = clip
        pair = value if isinstance(value, list) and len(value) == 2 else [value, value]
        if not all(number(v) for v in pair):
            fail(f"{at}.{key}", "must be a number ε or a pair [ε_low, ε_high]")
        config["clip_epsilon"], config["clip_epsilon_high"] = float(pair[0]), float(pair[1])
        paths["clip_epsilon"] = paths["clip_epsilon_high"] = f"{at}.{key}"
        read.append(key)
    else:
        assumed.append("clip ε 0.2")
    if (high := first(h, CLIP_HIGH_KEYS)) is not None:
        config["clip_epsilon_high"], paths["clip_epsilon_high"] = high[1], f"{at}.{high[0]}"
        read.append(high[0])
    if (beta := first(h, BETA_KEYS)) is not None:
        if not number(beta[1]):  # said here too: use_kl_loss false below would drop it unread
            fail(f"{at}.{beta[0]}", f"must be a number, not {describe(beta[1])}")
        config["beta"], paths["beta"] = beta[1], f"{at}.{beta[0]}"
        read.append(beta[0])
        if h.get("use_kl_loss") is False:  # OpenRLHF: the KL went into the reward, not the loss
            config["beta"] = 0.0
            notes.append(f"{beta[0]} {beta[1]} with use_kl_loss false: the KL was in the reward, the loss has none")
    else:
        config["beta"] = 0.0
        assumed.append("β 0 (no KL coefficient)")
    if (est := first(h, ESTIMATOR_KEYS)) is not None:
        if not isinstance(est[1], str) or est[1].lower() not in ESTIMATORS:
            fail(f"{at}.{est[0]}", f"{est[1]!r}: not a KL estimator this reader knows ({', '.join(ESTIMATORS)})")
        config["kl_estimator"] = ESTIMATORS[est[1].lower()]
        read.append(est[0])
    for ours, keys in (("max_length", MAX_LENGTH_KEYS), ("dual_clip", ("clip_ratio_c", "dual_clip")),
                       ("gradient_accumulation_steps", ("gradient_accumulation_steps",))):
        if (found := first(h, keys)) is not None:
            config[ours], paths[ours] = found[1], f"{at}.{found[0]}"
            read.append(found[0])
    if isinstance(h.get("std_normalize"), bool):  # OpenRLHF's switch (UNIPO's own Dr. GRPO run)
        config["advantage_std"] = "sample" if h["std_normalize"] else "none"
        paths["advantage_std"] = f"{at}.std_normalize"
        read.append("std_normalize")
    notes.append(f"read from header.hparams: {', '.join(read) or 'nothing'}")
    assumed.append("advantage_epsilon 1e-4")
    notes.append("assumed (UNIPO does not record them): " + "; ".join(assumed))
    return config


def infer_estimator(config: dict[str, Any], pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
               notes: list[str]) -> None:
    """No estimator named: the one whose values are the file's token_kl, else k3 (OpenRLHF's, TRL's)."""
    if "kl_estimator" in config or config.get("beta", 0) == 0:
        return
    if pairs:
        delta = np.concatenate([ref - logp for logp, ref, _ in pairs])
        kl = np.concatenate([k for _, _, k in pairs])
        for name, value in (("k3", np.expm1(delta) - delta), ("k1", -delta), ("k2", 0.5 * delta ** 2)):
            if np.allclose(value, kl, rtol=1e-5, atol=1e-7):
                config["kl_estimator"] = name
                notes.append(f"kl_estimator {name}: the one that gives the file's token_kl")
                return
    config["kl_estimator"] = "k3"
    notes.append("assumed kl_estimator k3 (no hparam names it, and token_kl matches none or is absent)")
