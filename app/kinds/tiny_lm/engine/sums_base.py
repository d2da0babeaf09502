"""The running-sums checkpoints: the addition base's recipe (base_training.py) on the
sums corpus (domain/sums_corpus.py), for models with the separator token and a longer context.
The base is what R1-Zero and R1 start from; the student, a smaller model pre-trained the same way,
is distillation's own start (as R1's distilled models started from existing smaller bases).
Built by `python -m app.base_model --task sums|student` and shipped with their cards."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from app.kinds.tiny_lm.domain.arith_task import VOCAB
from app.kinds.tiny_lm.domain.sums_corpus import build_sums_corpus
from app.kinds.tiny_lm.engine.base_training import BaseRecipe, texts_tensor, train_base
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM, TinyLMConfig

MODELS = Path(__file__).resolve().parents[4] / "walkthroughs" / "models"
SUMS_CHECKPOINT = MODELS / "tiny_lm_sums_base.safetensors"
STUDENT_CHECKPOINT = MODELS / "tiny_lm_sums_student.safetensors"
SUMS_MODEL = TinyLMConfig(vocab_size=len(VOCAB), block_size=72)  # a 6-number prompt (12 tokens) + 56 new
# 62,880 parameters, 58 % of the base's 108,416: two blocks (one could not carry a running sum in our
# runs: 0.17 accuracy after distillation against 0.25), narrower.
STUDENT_MODEL = TinyLMConfig(vocab_size=len(VOCAB), block_size=72, n_layer=2, n_embd=48, n_head=4)
SUMS_RECIPE = BaseRecipe(seed=0, corpus_size=20_000, steps=4000, batch_size=128, learning_rate=3e-3, dtype="float32",
                         schedule="cosine")


def sums_corpus_tensor(recipe: BaseRecipe, block_size: int) -> torch.Tensor:
    return texts_tensor([e.text for e in build_sums_corpus(recipe.corpus_size, recipe.seed)], block_size)


def train_sums_base(recipe: BaseRecipe = SUMS_RECIPE, steps: int | None = None,
                    progress: Callable[[int, float], None] | None = None, cfg: TinyLMConfig = SUMS_MODEL) -> TinyLM:
    return train_base(recipe, steps, progress, cfg=cfg, data=sums_corpus_tensor(recipe, cfg.block_size))
