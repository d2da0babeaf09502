"""The tiny decoder-only language model, as plain torch modules (nanoGPT's shape).

Token and position embeddings, `n_layer` pre-norm blocks of causal self-attention and an MLP,
a final norm and the LM head. Module names are what the exported graph will show
(`embed`, `blocks.0.attention`, `lm_head`, …), so they are short and say what each part is.
Float64 like the rest of the engine: the model is small, and exact numbers matter more here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.kinds.tiny_lm.domain.arith_task import ADDITION_VOCAB_SIZE


@dataclass(frozen=True)
class TinyLMConfig:
    vocab_size: int = ADDITION_VOCAB_SIZE  # the running-sums model's config names the full VOCAB
    block_size: int = 32  # prompt (≤ 6 tokens) + completion (≤ 24) fits
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd ({cfg.n_embd}) must be a multiple of n_head ({cfg.n_head})")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.out = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.causal: torch.Tensor
        self.register_buffer("causal", mask, persistent=False)
        self.last_weights: torch.Tensor | None = None  # (B, H, T, T), kept when asked for

    def forward(self, x: torch.Tensor, keep_weights: bool = False) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
        scores = scores.masked_fill(~self.causal[:length, :length], float("-inf"))
        weights = F.softmax(scores, dim=-1)
        self.last_weights = weights.detach() if keep_weights else None
        y = (weights @ v).transpose(1, 2).contiguous().view(batch, length, width)
        return self.out(y)


class MLP(nn.Module):
    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        self.up = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class Block(nn.Module):
    """Pre-norm residual block: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        self.norm_1 = nn.LayerNorm(cfg.n_embd)
        self.attention = CausalSelfAttention(cfg)
        self.norm_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, keep_weights: bool = False) -> torch.Tensor:
        # torch.add, not `+`: the tracer records public torch functions, so each residual add
        # becomes a node of the graph (a "+" a student can follow the residual stream through).
        x = torch.add(x, self.attention(self.norm_1(x), keep_weights))
        return torch.add(x, self.mlp(self.norm_2(x)))


class TinyLM(nn.Module):
    def __init__(self, cfg: TinyLMConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or TinyLMConfig()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.position = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, ids: torch.Tensor, keep_attention: bool = False) -> torch.Tensor:
        """ids: (B, T) token ids -> (B, T, V) next-token logits."""
        length = ids.shape[1]
        if length > self.cfg.block_size:
            raise ValueError(f"{length} tokens exceed block_size {self.cfg.block_size}")
        positions = torch.arange(length, device=ids.device)
        x = torch.add(self.embed(ids), self.position(positions))  # a node too (see Block.forward)
        for block in self.blocks:
            x = block(x, keep_attention)
        return self.lm_head(self.norm(x))


def init_tiny_lm(seed: int, cfg: TinyLMConfig | None = None) -> TinyLM:
    """A freshly initialised model, the same for the same seed on every machine (CPU generator)."""
    model = TinyLM(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() == 1:  # LayerNorm weights
                p.fill_(1.0)
            else:  # GPT-2's N(0, 0.02)
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model.to(torch.float64)


def completion_logprobs(model: TinyLM, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
    """log π(o_t | q, o_<t) of each completion token: (B, T) ids whose first `prompt_length` are the
    prompt -> (B, T - prompt_length). Padding is masked by the caller (the GRPO step's mask)."""
    logits = model(ids[:, :-1])  # position t predicts token t + 1
    logprobs = F.log_softmax(logits, dim=-1)
    targets = ids[:, 1:].unsqueeze(-1)
    return logprobs.gather(-1, targets).squeeze(-1)[:, prompt_length - 1:]
