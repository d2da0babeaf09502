"""The plan of the tiny LM's training paths (on the running-sums task):
each path's stages, their step counts, recipes and data sizes, the student's size, the evaluation
set and the seeds derived for each use. Numbers only; lm_paths.py runs them.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from app.engine.grpo.params import Conventions
from app.kinds.tiny_lm.domain.sums_task import SumPrompt, make_sum_prompts
from app.kinds.tiny_lm.engine.lm_stages import MAX_NEW, GRPORecipe, SFTRecipe
from app.kinds.tiny_lm.engine.sums_base import STUDENT_MODEL, SUMS_CHECKPOINT
from app.kinds.tiny_lm.engine.tiny_lm import TinyLMConfig

BASE_CHECKPOINT: Path = SUMS_CHECKPOINT
CONVENTIONS = Conventions(beta=0.001, max_length=MAX_NEW)  # DeepSeekMath's (k3 in the loss, sample mean), R1's β
# Liu et al. 2025 (Dr. GRPO): no std in the advantage, token sums over a constant (the token budget)
# instead of each completion's own length. β stays R1's, so only those two conventions differ.
DR_GRPO = Conventions(preset="dr_grpo", beta=CONVENTIONS.beta, max_length=MAX_NEW)
STUDENT: TinyLMConfig = STUDENT_MODEL  # 62,880 parameters; the base has 108,416
EVAL_PROMPTS, EVAL_SAMPLES = 80, 6  # 480 completions per point, 96 per difficulty
TRAIN_POOL = 2048  # drawn prompts; those in the held-out set are removed
RULES_RL = ("accuracy", "format")  # R1-Zero's rule rewards (§2.2.2)
RULES_ALL = ("accuracy", "format", "language")  # plus language consistency (§2.3.2)


@dataclass(frozen=True)
class StagePlan:
    id: str
    title: str
    kind: str
    description: str
    steps: int  # optimiser steps (GRPO, SFT) or sampling batches (rejection sampling)
    eval_every: int = 0  # 0: only at the start and the end


R1_ZERO = (
    StagePlan("rl", "GRPO from the base", "grpo",
              "GRPO straight from the base checkpoint with R1-Zero's rule rewards: accuracy + format, "
              "nothing against mixing the two scripts.", 60, 10),
)
R1 = (
    StagePlan("cold_start", "Cold-start SFT", "sft",
              "Supervised fine-tuning of the base on 32 right, formatted, single-script answers that work "
              "step by step.", 30, 10),
    StagePlan("reasoning_rl", "Reasoning-oriented RL", "grpo",
              "GRPO from the cold-start model with accuracy + format + language consistency "
              "(share of the reasoning written in the prompt's script).", 40, 10),
    StagePlan("rejection_sampling", "Rejection sampling", "rejection_sampling",
              "Four samples per training prompt from the RL model; right, formatted, single-script ones are kept.",
              4),
    StagePlan("sft", "SFT of the base", "sft",
              "Supervised fine-tuning of the base checkpoint (not the RL model) on the kept completions.", 80, 20),
    StagePlan("final_rl", "RL for all scenarios", "grpo",
              "A last GRPO stage from the SFT model with every reward: accuracy + format + language.", 30, 10),
)
DISTILLATION = (
    StagePlan("teacher_data", "R1's outputs", "rejection_sampling",
              "Four samples per training prompt from R1's final model; right, formatted, single-script ones are "
              "kept as the student's data (the points measure R1, the teacher).", 4),
    StagePlan("student_sft", "SFT of the student", "sft",
              "Supervised fine-tuning of a smaller model (2 blocks, 48 wide, 62,880 parameters, pre-trained "
              "on the base's corpus like the base) on R1's kept outputs; no RL.", 160, 40),
)
PLANS = {"r1-zero": R1_ZERO, "r1": R1, "distillation": DISTILLATION}
# AdamW learning rates: 2e-3 collapses R1-Zero (format up, accuracy down); 5e-4 learns within 60
# steps. R1's stages start from sharper SFT models, and at 5e-4 they lost accuracy on some seeds
# (on the sums task, reasoning RL fell 0.53 -> 0.32 mid-stage on seed 0 and R1 ended at 0.45-0.64
# on seeds 0-4); at 2e-4 they gain on every seed we measured (R1 0.68-0.73 on seeds 0-2).
GRPO_RECIPES = {
    "rl": GRPORecipe(0, RULES_RL, learning_rate=5e-4),
    "reasoning_rl": GRPORecipe(0, RULES_ALL, learning_rate=2e-4),
    "final_rl": GRPORecipe(0, RULES_ALL, learning_rate=2e-4),
}
SFT_RECIPES = {
    "cold_start": SFTRecipe(0, batch_size=16, learning_rate=1e-3),
    "sft": SFTRecipe(0, batch_size=32, learning_rate=1e-3),
    "student_sft": SFTRecipe(0, batch_size=32, learning_rate=1e-3),  # 3e-3 lost accuracy first (0.38 -> 0.27)
}
COLD_START_EXAMPLES = 32
REJECTION_PROMPTS, REJECTION_SAMPLES = 256, 4


def derived_seed(seed: int, *names: object) -> int:
    """A seed for one use (a stage, the evaluation), the same on every machine (string seeding is sha512)."""
    return random.Random("/".join(map(str, (seed, *names)))).getrandbits(31)


def scaled(steps: int, scale: float) -> int:
    return max(1, round(steps * scale))


def prompt_sets(seed: int) -> tuple[list[SumPrompt], list[SumPrompt]]:
    """(held-out evaluation prompts, training pool without them): both depend on the seed only."""
    held_out = list(make_sum_prompts(EVAL_PROMPTS, derived_seed(seed, "eval")))
    keys = set(held_out)
    pool = [p for p in make_sum_prompts(TRAIN_POOL, derived_seed(seed, "train")) if p not in keys]
    return held_out, pool
