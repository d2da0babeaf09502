"""GRPO step records (docs/reference/step-record.md) from verl 0.9.1's actor batch: one function, one mapping.

    from app.kinds.step_record.recorders.verl import config_from_verl, write_step_record
    # in RayPPOTrainer.fit, after the actor update (metrics: its actor_output_metrics):
    write_step_record(batch, self.tokenizer, f"records/step-{self.global_steps}.grpo-step.json",
                      step=self.global_steps, model=self.config.actor_rollout_ref.model.path,
                      config=config_from_verl(self.config.actor_rollout_ref.actor, self.config.algorithm),
                      metrics=actor_output_metrics)

`data` is the `DataProto` the actor's loss reads (verl 0.9.1 has no dp_actor.py: `update_actor` runs
`verl/workers/utils/losses.py` `ppo_loss` on `responses`, `response_mask`, `old_log_probs`,
`ref_log_prob`, `advantages`, `rollout_is_weights`). One record is one optimizer step: pass the
mini-batch of that step (the whole batch when ppo_mini_batch_size × rollout.n is the batch and
ppo_epochs is 1), and `log_probs` (and `entropy`), the current policy's, where the trainer has them;
without them the record is on-policy (π_θ = π_old, the first mini-batch of an update). verl is
imported only when a record is written: nothing in the app imports this module.

Not in the record's config, so a step where they bind recomputes without them: verl's hard-coded
clamps (the policy log-ratio to ±20, low_var_kl's Δ to ±20 and its value to ±10, GSPO's sequence
log-ratio to ≤ 10, the rollout IS log-ratio's safety bound). verl logs pg_clipfrac (and ppo_kl) as
the mean of its micro-batches' own values (pg_loss and kl_loss as their sum: the mini-batch's), and
its logged metrics as means over the update's mini-batches.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

from app.kinds.step_record.domain.arrays import pack
from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.domain.record import FORMAT, VERSION, Config

AGGREGATION = {"token-mean": "token_mean", "seq-mean-token-mean": "sample_mean",
               "seq-mean-token-sum-norm": "token_sum_norm"}  # token-sum, seq-mean-token-sum: the record has none
KL_ESTIMATORS = {"low_var_kl": "k3", "k3": "k3", "kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2"}
ADVANTAGE_EPSILON = 1e-6  # compute_grpo_outcome_advantage's default; the trainer never passes another


def _verl() -> Any:
    try:
        import verl
    except ImportError as exc:
        raise ImportError("app.kinds.step_record.recorders.verl writes records from verl's DataProto; install "
                          "verl 0.9.1 (pip install verl==0.9.1) in the environment that trains") from exc
    return verl


def write_step_record(data: Any, tokenizer: Any, path: str, *, step: int, model: str, config: dict,
                      log_probs: Any = None, entropy: Any = None, rewards: Mapping[str, Any] | None = None,
                      metrics: Mapping[str, Any] | None = None) -> dict:
    """Write `data` (a verl DataProto, right-padded responses) as a step record at `path`; returns the
    record. `config`: the app's conventions (`config_from_verl`). `rewards`: {name: one value per row},
    default {"score": Σ token_level_scores}. `metrics`: what verl logged for the step, by verl's keys."""
    verl, b = _verl(), data.batch
    if "rollout_is_weights" in b.keys() and config.get("is_correction", "none") == "none":
        raise ValueError("rollout_is_weights: name verl's rollout correction in config (config_from_verl's algorithm)")
    width = b["responses"].shape[-1]
    if log_probs is None:  # on-policy: π_θ is still π_old, whose entropies verl kept as "entropys"
        log_probs, entropy = b["old_log_probs"], b.get("entropys", None) if entropy is None else entropy
    arrays = {"logprobs": log_probs, "old_logprobs": b["old_log_probs"], "ref_logprobs": b.get("ref_log_prob", None),
              "sampling_logprobs": b.get("rollout_log_probs", None), "entropy": entropy}
    scores = b["token_level_scores"].sum(-1)  # the reward manager puts the score on the last token
    rewards = {"score": scores} if rewards is None else rewards
    groups: dict[Any, dict] = {}
    for i, uid in enumerate(data.non_tensor_batch["uid"]):  # verl's GRPO centres the rows of one uid
        n = int(b["attention_mask"][i, -width:].sum())  # the response without its right padding
        ids, keep = b["responses"][i, :n].tolist(), b["response_mask"][i, :n]  # 0 inside too: tool output
        advantage = b["advantages"][i, :n][keep.bool()].unique()  # per token in verl, one value per response
        if len(advantage) > 1:
            raise ValueError(f"row {i}: {len(advantage)} advantages over one response (not GRPO's outcome one)")
        prompt = b["prompts"][i][b["attention_mask"][i, :-width].bool()].tolist()  # left padding removed
        group = groups.setdefault(uid, {"id": str(uid), "prompt": tokenizer.decode(prompt, skip_special_tokens=False),
                                        "prompt_token_ids": prompt, "completions": []})
        group["completions"].append({
            "token_ids": ids, "mask": keep.int().tolist(), "advantage": float(advantage[0]) if len(advantage) else 0.0,
            # each token as the tokenizer decodes it alone: " the", "\n", special tokens as their text
            "tokens": [tokenizer.decode([t], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                       for t in ids],
            "rewards": {k: float(v[i]) for k, v in rewards.items()}, "reward": float(scores[i]),
            "truncated": getattr(tokenizer, "eos_token_id", None) not in ids,  # cut by response_length
            **{k: pack(v[i, :n].detach().float().cpu().numpy()) for k, v in arrays.items() if v is not None}})
    record = {"format": FORMAT, "version": VERSION, "config": {"max_length": width, **config},
              "run": {"framework": "verl", "framework_version": verl.__version__, "model": model, "step": step},
              "reward_functions": list(rewards), "groups": list(groups.values()),
              "metrics": {k: float(v) for k, v in (metrics or {}).items() if _number(v)}}
    parse_record(record, path)  # a record the app would refuse is never written
    _write(path, record)
    return record


def config_from_verl(actor: Any, algorithm: Any = None) -> dict:
    """verl's `actor_rollout_ref.actor` (and `algorithm`) config in the app's names (docs/reference/step-record.md,
    column "verl 0.9.1"); dicts, OmegaConf or verl's dataclasses. What the record cannot state is refused."""
    def get(cfg: Any, key: str, default: Any = None) -> Any:
        value = cfg.get(key, default) if cfg is not None else default
        return default if value is None else value

    mode = get(get(actor, "policy_loss", {}), "loss_mode", "vanilla")
    low = get(actor, "clip_ratio_low", get(actor, "clip_ratio", 0.2))
    high = get(actor, "clip_ratio_high", get(actor, "clip_ratio", 0.2))
    agg, kl_type = get(actor, "loss_agg_mode", "token-mean"), get(actor, "kl_loss_type", "low_var_kl")
    use_kl = bool(get(actor, "use_kl_loss", False))
    refused = []
    if mode not in ("vanilla", "gspo", "cispo"):
        refused.append(f"policy_loss.loss_mode={mode!r}: the record's losses are verl's vanilla, gspo and cispo")
    if mode == "cispo" and 1 - low > 0:
        refused.append("cispo with clip_ratio_low < 1: verl clamps ρ from below too; the record's cispo caps it only")
    if agg not in AGGREGATION:
        refused.append(f"loss_agg_mode={agg!r}: the record aggregates as {', '.join(AGGREGATION)}")
    if use_kl and kl_type not in KL_ESTIMATORS:
        refused.append(f"kl_loss_type={kl_type!r}: the record's estimators are k1, k2, k3 (no straight-through '+')")
    if get(actor, "entropy_coeff", 0.0) != 0:
        refused.append("entropy_coeff != 0: an entropy bonus the record has no term for")
    if algorithm is not None and get(algorithm, "adv_estimator", "grpo") not in ("grpo", "grpo_vectorized"):
        refused.append(f"adv_estimator={get(algorithm, 'adv_estimator')!r}: a what-if recomputes GRPO's advantages")
    if algorithm is not None and get(algorithm, "use_kl_in_reward", False):
        refused.append("use_kl_in_reward: the record's config has no kl_placement (its KL is in the loss)")
    is_correction, is_min, is_max = _rollout_correction(get(algorithm, "rollout_correction"), refused)
    out = {
        "policy_loss": "cispo" if mode == "cispo" else "clip",
        "loss_aggregation": AGGREGATION.get(agg, "token_mean"),
        # cispo: the app's bound is an absolute cap on ρ, verl's 1 + clip_ratio_high
        "clip_epsilon": low if mode != "cispo" else 0.2, "clip_epsilon_high": 1 + high if mode == "cispo" else high,
        # vanilla always applies the dual clip; gspo and cispo have none
        "dual_clip": get(actor, "clip_ratio_c", 3.0) if mode == "vanilla" else None,
        # verl's fixed guards (core_algos.py): the policy log-ratio to ±20; low_var_kl's Δ to ±20, its value ±10
        "log_ratio_clamp": 20.0 if mode == "vanilla" else None,
        "kl_clamp": 10.0 if use_kl and kl_type == "low_var_kl" else None,
        "beta": get(actor, "kl_loss_coef", 0.001) if use_kl else 0.0,
        "kl_estimator": KL_ESTIMATORS.get(kl_type, "k3"), "kl_bias_correction": False,
        "advantage_std": "sample" if get(algorithm, "norm_adv_by_std_in_grpo", True) else "none",  # torch.std
        "advantage_epsilon": ADVANTAGE_EPSILON,
        "importance_sampling_level": "sequence" if mode == "gspo" else "token",
        "is_correction": is_correction, "is_clip_min": is_min, "is_clip_max": is_max,
    }
    if get(actor, "loss_scale_factor") is not None:  # otherwise agg_loss divides by the response width
        out["max_length"] = int(get(actor, "loss_scale_factor"))
    try:
        Config.model_validate(out)
    except ValueError as exc:
        refused.append(f"outside the record's config ranges: {exc}")
    if refused:
        raise ValueError("this verl configuration cannot be written as a faithful step record:\n- "
                         + "\n- ".join(refused))
    return out


def _rollout_correction(cfg: Any, refused: list[str]) -> tuple[str, float | None, float | None]:
    """verl's rollout IS weights (rollout_corr_helper.compute_rollout_correction_weights): a threshold
    "upper" truncates (TIS), "lower_upper" zeroes outside (IcePop): the record's *_truncate and *_mask."""
    level = cfg.get("rollout_is") if cfg is not None else None
    if level is None or cfg.get("bypass_mode", False):
        return "none", None, None
    if cfg.get("rollout_is_batch_normalize", False) or level not in ("token", "sequence"):
        refused.append("rollout_is_batch_normalize / rollout_is level: weights the record cannot recompute")
        return "none", None, None
    threshold = cfg.get("rollout_is_threshold", 2.0)
    if isinstance(threshold, str) and "_" in threshold:
        lower, upper = (float(x) for x in threshold.split("_", 1))
        return f"{level}_mask", lower, upper
    return f"{level}_truncate", None, float(threshold)


def _number(value: Any) -> bool:
    """A logged scalar (verl's metrics may also hold lists, one value per mini-batch: left out)."""
    try:
        return not isinstance(value, bool) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _write(path: str, record: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:  # whole files only: renamed once written
        json.dump(record, f, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    os.replace(path + ".tmp", path)
