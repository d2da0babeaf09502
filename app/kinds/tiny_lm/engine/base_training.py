"""Pre-training of the tiny LM's base checkpoint on the synthetic corpus.

Next-token cross-entropy over every real token (padding masked), AdamW, a fixed recipe and
seed: the same checkpoint from the same recipe on the same machine (float64 on the CPU). The
corpus makes the result mediocre on purpose (domain/arith_corpus.py), so GRPO has work to do.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.kinds.tiny_lm.domain.arith_corpus import build_corpus
from app.kinds.tiny_lm.domain.arith_task import PAD, TOKEN_ID, encode
from app.kinds.tiny_lm.engine.tiny_lm import TinyLM, TinyLMConfig, init_tiny_lm


@dataclass(frozen=True)
class BaseRecipe:
    seed: int = 0
    corpus_size: int = 4000
    steps: int = 600
    batch_size: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    dtype: str = "float64"  # the sums base trains in float32: 2x faster on a CPU, as deterministic
    schedule: str = "constant"  # or "cosine": the learning rate decays to 0 over the steps


def corpus_tensor(recipe: BaseRecipe, block_size: int) -> torch.Tensor:
    """(N, L) token ids, right-padded with <pad>; L ≤ block_size + 1 (inputs and shifted targets)."""
    return texts_tensor([e.text for e in build_corpus(recipe.corpus_size, recipe.seed)], block_size)


def texts_tensor(texts: list[str], block_size: int) -> torch.Tensor:
    rows = [encode(text) for text in texts]
    width = max(len(r) for r in rows)
    if width > block_size + 1:
        raise ValueError(f"a corpus text has {width} tokens; the model reads {block_size}")
    return torch.tensor([r + [TOKEN_ID[PAD]] * (width - len(r)) for r in rows])


def lm_loss(model: TinyLM, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the real (non-padding) targets."""
    logits = model(ids[:, :-1])
    targets = ids[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=TOKEN_ID[PAD])


def train_base(recipe: BaseRecipe, steps: int | None = None,
               progress: Callable[[int, float], None] | None = None,
               cfg: TinyLMConfig | None = None, data: torch.Tensor | None = None) -> TinyLM:
    """The base checkpoint: `steps` (default the recipe's) AdamW steps on seeded batches of `data`
    (default: the addition corpus of the recipe) for a model of `cfg` (default TinyLMConfig())."""
    cfg = cfg or TinyLMConfig()
    model = init_tiny_lm(recipe.seed, cfg).to(getattr(torch, recipe.dtype))
    data = corpus_tensor(recipe, cfg.block_size) if data is None else data
    gen = torch.Generator().manual_seed(recipe.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    total = recipe.steps if steps is None else steps
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total) if recipe.schedule == "cosine"
                else None)
    for step in range(total):
        batch = data[torch.randint(len(data), (recipe.batch_size,), generator=gen)]
        loss = lm_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if schedule is not None:
            schedule.step()
        if progress is not None:
            progress(step, float(loss.detach()))
    return model.eval()


def state_digest(model: TinyLM) -> str:
    """sha256 over every tensor's name and float64 bytes, in name order: the checkpoint's identity."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().to(torch.float64).contiguous().numpy().tobytes())
    return h.hexdigest()


def recipe_dict(recipe: BaseRecipe, cfg: TinyLMConfig | None = None) -> dict:
    return {**asdict(recipe), "model": asdict(cfg or TinyLMConfig())}


def load_base(path, card_path=None) -> TinyLM:
    """The shipped checkpoint in float64, refused if its bytes are not the ones its card names."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    path = Path(path)
    card = json.loads(Path(card_path or path.with_suffix(".json")).read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != card["file_sha256"]:
        raise ValueError(f"{path}: sha256 {digest[:16]}… is not the card's {card['file_sha256'][:16]}…")
    model = TinyLM(TinyLMConfig(**card["recipe"]["model"]))
    model.load_state_dict({k: v.to(torch.float64) for k, v in load_file(str(path)).items()})
    return model.to(torch.float64).eval()
