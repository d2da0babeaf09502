"""A GRPO group: a prompt in the model's chat template, and G completions sampled from it with one seeded
generator (every LM kind's step and run draw their groups here)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from app.engine.lm.decoder import Decoder
from app.engine.lm.loaded import LoadedModel

Progress = Callable[[str, int, int], None]  # (stage, done, total): "sampling" 3/48, "inner step" 1/2, ...
SAMPLING_THREADS = 1


def no_progress(stage: str, done: int, total: int) -> None:
    return None


@dataclass(frozen=True)
class SampledGroup:
    ids: torch.Tensor  # (G, P + T) the prompt, then each completion right-padded (with the pad id)
    mask: torch.Tensor  # (G, T) 1 on a completion's real tokens (its <|im_end|> included), 0 after
    prompt_length: int
    texts: tuple[str, ...]  # decoded, special tokens dropped
    stopped: tuple[bool, ...]  # ended with <|im_end|>


def chat_ids(loaded: LoadedModel, user_text: str) -> list[int]:
    """One user message in the model's chat template, ending with the assistant's opening: its ids (the
    template given the special tokens' strings, no second BOS: LoadedModel.chat_ids)."""
    return loaded.chat_ids([{"role": "user", "content": user_text}])


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to at most `n` inside, the caller's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(n, before)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def sample_group(loaded: LoadedModel, model: Decoder, prompt: list[int], group_size: int, max_new_tokens: int,
                      temperature: float, seed: int, progress: Progress = no_progress) -> SampledGroup:
    """G completions of one prompt, drawn by one generator seeded with `seed` (on the model's device).

    On the CPU one intra-op thread: each token's step works on G rows, so every op is small and a parallel
    region's start and barrier cost more than the second thread gives back; on a busy 2-core machine two
    threads took 8x as long (16 tokens: 30 s, one thread 3.7 s). One thread also makes the draw independent
    of the caller's thread count."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt] * group_size, device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    eos, pad = loaded.special_ids.eos, loaded.special_ids.pad
    threads = SAMPLING_THREADS if device.type == "cpu" else torch.get_num_threads()
    with torch_threads(threads):
        new_ids, new_mask = model.generate(ids, torch.ones_like(ids), max_new_tokens, temperature, generator,
                                           eos_id=eos, pad_id=pad,
                                           on_token=lambda n: progress("sampling", n, max_new_tokens))
    texts, stopped = [], []
    for row, keep in zip(new_ids.tolist(), new_mask.tolist(), strict=True):
        real = [token for token, m in zip(row, keep, strict=True) if m]
        texts.append(loaded.tokenizer.decode(real, skip_special_tokens=True))
        stopped.append(bool(real) and real[-1] == eos)
    dtype = next(model.parameters()).dtype
    return SampledGroup(torch.cat([ids, new_ids], dim=1), new_mask.to(dtype), len(prompt), tuple(texts), tuple(stopped))
