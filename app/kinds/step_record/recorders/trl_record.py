"""The TRL recorder's record: GRPOConfig in the app's names, the refusals, and the JSON written.

Split from trl.py (which wraps the trainer's methods) so each stays readable; every function
reads a live `GRPOTrainer` (TRL 1.16) and what trl.py kept of one optimizer step. The mapping
is docs/reference/step-record.md's table, column "TRL 1.16".
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from app.kinds.step_record.domain.arrays import pack
from app.kinds.step_record.domain.parsing import parse_record
from app.kinds.step_record.domain.record import FORMAT, VERSION, Config

ADVANTAGE_EPSILON = 1e-4  # hard-coded in TRL: (std + 1e-4)
AGGREGATION = {"grpo": "sample_mean", "bnpo": "token_mean", "dapo": "token_mean", "cispo": "token_mean",
               "dr_grpo": "token_sum_norm"}
GLOBAL_NORMALIZER = ("dapo", "cispo")  # divided by num_items_in_batch of the whole generation batch
FRAMEWORK_FIELDS = (
    "loss_type", "beta", "epsilon", "epsilon_high", "delta", "scale_rewards", "multi_objective_aggregation",
    "reward_weights", "num_generations", "num_iterations", "importance_sampling_level", "max_completion_length",
    "mask_truncated_completions", "top_entropy_quantile", "entropy_coef", "use_adaptive_entropy",
    "use_bias_correction_kl", "off_policy_mask_threshold", "use_vllm", "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_max",
    "gradient_accumulation_steps", "per_device_train_batch_size", "steps_per_generation", "generation_batch_size",
    "temperature", "top_p", "top_k", "learning_rate", "sync_ref_model",
)


def refusals(t: Any) -> list[str]:
    """What in this trainer's configuration a record would state wrongly (empty: nothing)."""
    a, ga, spg = t.args, t.args.gradient_accumulation_steps, t.args.steps_per_generation
    found = []
    if a.loss_type not in AGGREGATION:
        found.append(f"loss_type={a.loss_type!r}: the record's losses are TRL's grpo, bnpo, dapo, cispo, dr_grpo")
    if a.top_entropy_quantile < 1.0:
        found.append("top_entropy_quantile < 1 masks tokens by an entropy quantile the record does not carry")
    if a.off_policy_mask_threshold is not None:
        found.append("off_policy_mask_threshold drops sequences by a mask the record does not carry")
    if t._entropy_bonus_enabled:
        found.append("entropy_coef / use_adaptive_entropy add an entropy bonus the record has no term for")
    if a.delta is not None:
        found.append("delta caps the ratio itself (two-sided clipping), which is not the record's dual_clip")
    if a.multi_objective_aggregation != "sum_then_normalize":
        found.append("multi_objective_aggregation normalize_then_sum: the record's advantages are of Σ w·r")
    if t.aux_loss_enabled:
        found.append("a MoE router auxiliary loss is added to the loss")
    if t.accelerator.num_processes > 1:
        found.append("several processes: each sees only its own rows, while TRL logs metrics over all of them")
    if str(getattr(a.logging_strategy, "value", a.logging_strategy)) != "steps" or a.logging_steps != 1:
        found.append("logging_steps must be 1 (strategy \"steps\"): otherwise TRL logs means over several steps")
    if a.loss_type == "bnpo" and ga > 1:
        found.append("bnpo with gradient accumulation: a mean of micro-batch token means, not one token mean")
    if a.loss_type in GLOBAL_NORMALIZER and spg < ga:
        found.append(f"{a.loss_type} with steps_per_generation < gradient_accumulation_steps: a step spans "
                     "generation batches, each divided by its own num_items_in_batch")
    try:
        Config.model_validate(record_config(t, None))
    except ValueError as exc:
        found.append(f"outside the record's config ranges: {exc}")
    return found


def record_config(t: Any, token_normalizer: float | None) -> dict[str, Any]:
    """GRPOConfig in the app's names (docs/reference/step-record.md)."""
    a = t.args
    scale = {True: "group", False: "none"}.get(a.scale_rewards, a.scale_rewards)  # older TRL took a bool
    is_on = bool(t.use_vllm and t.vllm_importance_sampling_correction)
    return {
        "policy_loss": "cispo" if a.loss_type == "cispo" else "clip",
        "loss_aggregation": AGGREGATION.get(a.loss_type, "token_mean"),
        "token_normalizer": token_normalizer,
        "clip_epsilon": t.epsilon_low, "clip_epsilon_high": t.epsilon_high, "dual_clip": None,
        "beta": t.beta, "kl_estimator": "k3", "kl_bias_correction": bool(a.use_bias_correction_kl),
        "advantage_std": "none" if scale == "none" else "sample", "advantage_epsilon": ADVANTAGE_EPSILON,
        "importance_sampling_level": t.importance_sampling_level,
        "is_correction": t.vllm_importance_sampling_mode if is_on else "none",
        "is_clip_min": t.vllm_importance_sampling_clip_min if is_on else None,
        "is_clip_max": t.vllm_importance_sampling_clip_max if is_on else None,
        "max_length": t.max_completion_length, "gradient_accumulation_steps": a.gradient_accumulation_steps,
    }


def _unique(names: list[str]) -> list[str]:
    """The record's reward-function names must differ; TRL allows two "<lambda>"s."""
    out: list[str] = []
    for name in names:
        out.append(name if name not in out else f"{name}#{len(out) + 1}")
    return out


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _model_name(t: Any) -> str:
    model = t.accelerator.unwrap_model(t.model)
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    # a local checkpoint is named by its folder, not by this machine's path to it
    return os.path.basename(os.path.normpath(name)) if os.path.isdir(name) else name


def _completion(t: Any, r: dict, names: list[str], weights: list[float]) -> dict[str, Any]:
    tokenizer = getattr(t, "_tokenizer", None) or t.processing_class
    ids = r["completion_ids"]
    rewards = {name: None if math.isnan(v) else v for name, v in zip(names, r["rewards"], strict=True)}
    scored = [np.float32(w) * np.float32(v) for w, v in zip(weights, rewards.values(), strict=True) if v is not None]
    advantage = r["advantage"]
    if isinstance(advantage, list):  # a subclass's (B, T) advantages
        if len(set(advantage)) > 1:
            raise ValueError("per-token advantages: the record holds one advantage per completion")
        advantage = advantage[0]
    out = {
        "token_ids": ids,
        # each token as the tokenizer decodes it alone: " the", "\n", special tokens as their text
        "tokens": [tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                   for i in ids],
        "rewards": rewards,
        "reward": float(np.sum(scored, dtype=np.float32)) if scored else None,  # TRL's float32 nansum
        "advantage": advantage, "logprobs": pack(r["logprobs"]),
        "truncated": not any(i in t.eos_token_ids for i in ids),  # no EOS within max_completion_length
    }
    if 0 in r["mask"]:
        out["mask"] = [int(m) for m in r["mask"]]
    for name in ("old_logprobs", "ref_logprobs", "sampling_logprobs", "entropy"):
        if r[name] is not None:
            if not np.isfinite(r[name]).all():
                raise ValueError(f"{name}: TRL's tensor holds NaN (a token vLLM could not score)")
            out[name] = pack(r[name])
    return out


def _groups(t: Any, rows: list[dict]) -> tuple[list[dict], dict]:
    """Rows by group: TRL centred the rewards of rows g·G … g·G+G−1 of one generation batch."""
    names, weights = _unique(list(t.reward_func_names)), [float(w) for w in t.reward_weights.tolist()]
    tokenizer = getattr(t, "_tokenizer", None) or t.processing_class
    grouped: dict[tuple[int, int], list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["key"]):
        grouped.setdefault((r["key"][0], r["key"][1] // t.num_generations), []).append(r)
    groups, where = [], {}
    for gi, ((gen, g), members) in enumerate(grouped.items()):
        prompt = members[0]["prompt"]
        if not isinstance(prompt, str):  # conversational: the text the chat template made of it
            prompt = tokenizer.decode(members[0]["prompt_ids"], skip_special_tokens=False)
        groups.append({"id": f"generation {gen}, group {g}", "prompt": prompt,
                       "prompt_token_ids": members[0]["prompt_ids"],
                       "completions": [_completion(t, r, names, weights) for r in members]})
        where.update({r["key"]: (gi, ci) for ci, r in enumerate(members)})
    return groups, where


def _notes(t: Any, micro: list[dict]) -> str:
    a, notes = t.args, []
    if len(micro) > 1:
        notes.append(f"This step spans gradient accumulation: {len(micro)} micro-batches of "
                     f"{len(micro[0]['rows'])} completions. TRL's logged loss is the sum of their losses; its "
                     "clip_ratio, kl and entropy are the mean of the micro-batches' own token means (each completion's "
                     "micro_batch says which).")
    if a.steps_per_generation > a.gradient_accumulation_steps:
        notes.append("steps_per_generation > gradient_accumulation_steps: a group's completions are spread over "
                     "several optimizer steps; this record holds the ones this step trained on.")
    if a.scale_rewards == "batch":
        notes.append("scale_rewards='batch': TRL divided by the batch's reward std, not each group's; "
                     "the advantages are TRL's own.")
    return " ".join(notes)


def build_record(t: Any, version: str, step: int, micro: list[dict], logs: dict[str, Any]) -> tuple[dict, dict]:
    """The step's record, validated by the app's own parser, and where each row landed (group, index)."""
    rows = [r for m in micro for r in m["rows"]]
    groups, where = _groups(t, rows)
    if len(micro) > 1:  # which micro-batch each completion was in: TRL logs their metrics' mean
        for mi, m in enumerate(micro):
            for r in m["rows"]:
                gi, ci = where[r["key"]]
                groups[gi]["completions"][ci]["micro_batch"] = mi
    token_normalizer = None
    if t.args.loss_type in GLOBAL_NORMALIZER:
        values = {m["normalizer"] for m in micro}
        if len(values) > 1:
            raise ValueError(f"its micro-batches were divided by different normalizers {sorted(values)}")
        value = values.pop()
        masked, total = sum(sum(r["mask"]) for r in rows), sum(len(r["mask"]) for r in rows)
        # named unless it is the record's own count either way (all tokens, or those in the loss)
        token_normalizer = None if value == masked == total else value
    record = {
        "format": FORMAT, "version": VERSION,
        "run": {"framework": "trl", "framework_version": version, "model": _model_name(t), "step": step,
                "dtype": micro[0]["dtype"], "note": _notes(t, micro)},
        "config": record_config(t, token_normalizer),
        "framework_config": {f: v for f in FRAMEWORK_FIELDS if _jsonable(v := getattr(t.args, f, None))},
        "reward_functions": _unique(list(t.reward_func_names)),
        "reward_weights": [float(w) for w in t.reward_weights.tolist()],
        "groups": groups,
        "metrics": {k: float(v) if math.isfinite(v) else None for k, v in logs.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)},
    }
    parse_record(record, f"step {step}")  # a record the app would refuse is never written
    return record, where


def write_record(directory: str, step: int, record: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"step-{step}.grpo-step.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:  # whole files only: renamed once written
        json.dump(record, f, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    os.replace(path + ".tmp", path)
    return path
