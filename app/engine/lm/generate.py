"""One sampling loop for every language model of the app: the GGUF models' decoder and any LM kind's own.

A model takes part through a `NextLogits` callable: given the tokens it has not seen yet ([B, n]: the
prompt at the first call, then each row's newest token), it returns each row's next-token logits [B, V]
and keeps whatever it needs (a KV cache) to go on from there. `generate` owns what must be the same for
every model: the temperature, the draw, where a row stops, what it holds after it stopped and the mask
that says so. A test holds every LM kind's generation and the decoder's to this one function object.

The draw (`draw`): temperature 0 is greedy (argmax); otherwise softmax(logits / temperature), over the
`top_k` likeliest tokens when given and never over `banned` tokens, in `probabilities_dtype`, drawn with
`generator` on the generator's own device (a CPU generator gives the same group on any device).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

NextLogits = Callable[[torch.Tensor], torch.Tensor]  # new tokens [B, n] -> next-token logits [B, V]


@dataclass(frozen=True)
class Draw:
    """How one token per row is drawn from its logits."""
    temperature: float
    top_k: int | None = None
    banned: Sequence[int] = ()  # tokens never drawn (a padding token that is in the vocabulary)
    probabilities_dtype: torch.dtype = torch.float32  # float64 where a model's draws were defined so

    def __call__(self, logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        # logits: [B, V] -> tokens [B]
        if self.banned:
            logits = logits.clone()
            logits[:, list(self.banned)] = float("-inf")
        if self.temperature == 0:
            return logits.argmax(dim=-1)  # [B]
        scaled = logits / self.temperature  # [B, V]
        if self.top_k is not None:
            kth = scaled.topk(self.top_k, dim=-1).values[:, -1:]  # [B, 1]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probabilities = F.softmax(scaled.to(self.probabilities_dtype), dim=-1)  # [B, V]
        drawn = torch.multinomial(probabilities.to(generator.device), 1, generator=generator)  # [B, 1]
        return drawn.squeeze(-1).to(logits.device)  # [B]


@torch.no_grad()
def generate(next_logits: NextLogits, prompt: torch.Tensor, max_new_tokens: int, draw: Draw,
             generator: torch.Generator, eos_id: int, pad_id: int,
             on_token: Callable[[int], None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to `max_new_tokens` after `prompt` [B, P] (the model's own view of it: padding is its business).

    A row stops at its first `eos_id`, which it keeps; after it the row holds `pad_id` with mask 0. The loop
    ends once every row has stopped. Returns (new_ids [B, N], new_mask [B, N]) with N ≤ max_new_tokens;
    `on_token(n)` is called after the n-th new token of every row is drawn (a job's progress)."""
    batch = prompt.shape[0]
    logits = next_logits(prompt)  # [B, V]
    done = torch.zeros(batch, dtype=torch.bool, device=prompt.device)  # [B]
    new_ids: list[torch.Tensor] = []
    new_mask: list[torch.Tensor] = []
    for _ in range(max_new_tokens):
        token = draw(logits, generator)  # [B]
        token = torch.where(done, torch.full_like(token, pad_id), token)
        new_ids.append(token)
        new_mask.append((~done).long())
        done = done | (token == eos_id)
        if on_token is not None:
            on_token(len(new_ids))
        if bool(done.all()) or len(new_ids) == max_new_tokens:
            break
        logits = next_logits(token[:, None])  # [B, V]
    if not new_ids:
        empty = prompt.new_zeros((batch, 0))
        return empty, empty
    return torch.stack(new_ids, dim=1), torch.stack(new_mask, dim=1)  # each [B, N]
