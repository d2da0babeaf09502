"""TRL trainer_state.json documents for the run tests: the keys TRL's GRPOTrainer logs (as in the
trainer_state.json files TRL 0.2x-1.x writes: clip_ratio/*, completions/*, entropy, frac_reward_zero_std,
kl, loss, num_tokens, reward, reward_std, rewards/<func>/mean), one entry per logging step, then the
closing entry transformers' Trainer appends."""
from __future__ import annotations


def entry(step: int, **overrides) -> dict:
    base = {
        "clip_ratio/high_max": 0.0, "clip_ratio/high_mean": 0.0, "clip_ratio/low_mean": 0.0, "clip_ratio/low_min": 0.0,
        "clip_ratio/region_mean": 0.0, "completions/clipped_ratio": 0.05, "completions/mean_length": 40.0 + step % 7,
        "entropy": 0.8, "epoch": step / 1000, "frac_reward_zero_std": 0.1, "grad_norm": 0.5, "kl": 0.01,
        "learning_rate": 1e-6, "loss": 0.01 * (1 + step % 3), "num_tokens": 1000.0 * step, "reward": 0.3 + step / 1000,
        "reward_std": 0.2, "rewards/accuracy/mean": 0.3 + step / 1000, "step": step,
    }
    base.update(overrides)
    return base


def closing(step: int) -> dict:
    return {"epoch": step / 1000, "step": step, "total_flos": 0.0, "train_loss": 0.02, "train_runtime": 321.5,
            "train_samples_per_second": 1.5, "train_steps_per_second": 0.1}


def state(entries: list[dict], *, close: bool = True) -> dict:
    last = entries[-1]["step"] if entries else 0
    return {"best_metric": None, "epoch": last / 1000, "global_step": last, "logging_steps": 1,
            "log_history": entries + ([closing(last)] if close else []), "max_steps": last}


def healthy(n: int = 60) -> dict:
    """A run no rule should speak of: some clipping, few ties, KL rising smoothly, entropy easing 20 %."""
    return state([entry(s, **{"clip_ratio/region_mean": 0.002, "kl": 0.01 + 0.0005 * s,
                              "entropy": 0.8 - 0.16 * s / n}) for s in range(1, n + 1)])
