"""The LM stack's decoder, as plain torch modules (nanoGPT's shape): a Llama-family transformer.

Token embedding, `n_layer` pre-norm blocks (RMSNorm, grouped-query causal self-attention with rotary
position embeddings, RMSNorm, SwiGLU MLP), a final RMSNorm and the LM head, whose weight is the
embedding's when `tie_embeddings`. Module names are what a graph of the model shows (`embed`,
`blocks.0.attention.q`, `blocks.0.mlp.gate`, `lm_head`, ...), so they are short and say what each part is.

The families differ in three switches of the config, each off by default (Llama's own shape):
- `qkv_bias` (Qwen2): q, k and v have biases (transformers' Qwen2Attention: `bias=True` on q/k/v_proj,
  none on o_proj);
- `qk_norm` (Qwen3): an RMSNorm over each head's D channels of q and of k (`attention.q_norm`,
  `attention.k_norm`), after the projection and before RoPE (transformers' Qwen3Attention);
- `head_dim_override` (Qwen3's `attention.key_length`): a head's width D when it is not C / H (Qwen3-0.6B:
  C = 1024, H = 16, D = 128), so q is C -> H·D and o is H·D -> C;
and one of RoPE: `rope_freq_factors`, the divisor of each channel pair's frequency (Llama 3.1's "llama3"
scaling, which llama.cpp stores as the `rope_freqs.weight` tensor; a linear scaling divides them all).

Shapes in the comments: B batch, T tokens, C = n_embd, H = n_head, K = n_kv_head, D = one head's width
(C / H unless overridden), F = ffn_dim, V = vocab_size, S = the tokens a KV cache holds plus the new ones.

Padding: `attention_mask` [B, T] is 1 on real tokens and 0 on padding, left or right. A padded key is
never attended to, and positions count real tokens only (a left-padded row's first real token is at
position 0), so a padded row's logits at its real tokens are the unpadded row's. A padding query sees
only itself: its output is finite, and meaningless.

RoPE (rope.py) and the KV cache with its masks (kv_cache.py) live beside it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812  (torch's own spelling)

from app.engine.lm.generate import Draw, NextLogits, generate
from app.engine.lm.kv_cache import KVCache, allowed_keys, positions_from_mask
from app.engine.lm.rope import RotaryEmbedding, rope_cos_sin, rope_inverse_frequencies


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int
    n_layer: int
    n_embd: int
    n_head: int
    n_kv_head: int
    ffn_dim: int
    rope_theta: float
    rms_eps: float
    context_length: int
    tie_embeddings: bool = True
    # the families' differences (module docstring); the defaults are Llama's, so a Llama config reads as before
    head_dim_override: int | None = None  # D when it is not C / H (Qwen3's attention.key_length)
    qkv_bias: bool = False  # Qwen2: biases on q, k and v
    qk_norm: bool = False  # Qwen3: RMSNorm over each head of q and k, before RoPE
    rope_freq_factors: tuple[float, ...] | None = None  # [D/2]: each channel pair's frequency divided by it

    def __post_init__(self) -> None:
        if self.head_dim_override is None and self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_head ({self.n_head}) must be a multiple of n_kv_head ({self.n_kv_head})")
        if self.head_dim % 2:
            raise ValueError(f"a head's width ({self.head_dim}) must be even for RoPE")
        if self.rope_freq_factors is not None:
            # a config read back from JSON (the converted cache) holds a list: one spelling, so configs compare equal
            object.__setattr__(self, "rope_freq_factors", tuple(float(f) for f in self.rope_freq_factors))
            if len(self.rope_freq_factors) != self.head_dim // 2:
                raise ValueError(f"{len(self.rope_freq_factors)} RoPE frequency factors for a head of "
                                 f"{self.head_dim} channels (one per channel pair: {self.head_dim // 2})")

    @property
    def head_dim(self) -> int:
        return self.head_dim_override if self.head_dim_override is not None else self.n_embd // self.n_head


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + ε) · weight, over the last dimension (no mean subtracted, no bias)."""

    def __init__(self, width: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))  # [C]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [B, T, C] (or a head's channels, [B, H, T, D]: the last axis is the one normed)
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # [B, T, 1]
        return x * torch.rsqrt(mean_square + self.eps) * self.weight  # [B, T, C]


class Attention(nn.Module):
    """Causal grouped-query self-attention: H query heads share K key/value heads (H / K each).
    With `qkv_bias` q, k and v add a bias (Qwen2); with `qk_norm` each head of q and k is RMS-normed
    over its D channels before RoPE (Qwen3)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        self.q = nn.Linear(cfg.n_embd, cfg.n_head * cfg.head_dim, bias=cfg.qkv_bias)  # C -> H·D
        self.k = nn.Linear(cfg.n_embd, cfg.n_kv_head * cfg.head_dim, bias=cfg.qkv_bias)  # C -> K·D
        self.v = nn.Linear(cfg.n_embd, cfg.n_kv_head * cfg.head_dim, bias=cfg.qkv_bias)  # C -> K·D
        self.o = nn.Linear(cfg.n_head * cfg.head_dim, cfg.n_embd, bias=False)  # H·D -> C
        # one [D] weight shared by every head (transformers' Qwen3RMSNorm(head_dim)); absent, not identity,
        # when off, so a Llama's modules and state dict are what they were
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_eps) if cfg.qk_norm else None
        self.rope = RotaryEmbedding()
        self.last_weights: torch.Tensor | None = None  # [B, H, T, S], kept when asked for

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, allowed: torch.Tensor,
                cache: KVCache | None = None, layer: int = 0, keep_weights: bool = False) -> torch.Tensor:
        # x: [B, T, C]; cos/sin: [B, 1, T, D]; allowed: [B, 1, T, S] (True where a query may see a key)
        batch, length, _ = x.shape
        q = self.q(x).view(batch, length, self.n_head, self.head_dim).transpose(1, 2)  # [B, H, T, D]
        k = self.k(x).view(batch, length, self.n_kv_head, self.head_dim).transpose(1, 2)  # [B, K, T, D]
        v = self.v(x).view(batch, length, self.n_kv_head, self.head_dim).transpose(1, 2)  # [B, K, T, D]
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # each head over its last axis, D: shapes unchanged
        q, k = self.rope(q, k, cos, sin)
        if cache is not None:
            k, v = cache.extend(layer, k, v)  # [B, K, S, D]
        group = self.n_head // self.n_kv_head
        k = k.repeat_interleave(group, dim=1)  # [B, H, S, D]: query head h reads key/value head h // group
        v = v.repeat_interleave(group, dim=1)  # [B, H, S, D]
        # torch.matmul and torch.mul, not `@` and `*`: the tracer records public torch functions, so the
        # scores and the weighted sum are nodes of the graph a reader can select
        scores = torch.matmul(q, k.transpose(-2, -1)) / self.head_dim**0.5  # [B, H, T, S]
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = F.softmax(scores, dim=-1)  # [B, H, T, S]
        self.last_weights = weights.detach() if keep_weights else None
        y = torch.matmul(weights, v).transpose(1, 2).reshape(batch, length, self.n_head * self.head_dim)  # [B, T, H·D]
        return self.o(y)  # [B, T, C]


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) · up(x))."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.gate = nn.Linear(cfg.n_embd, cfg.ffn_dim, bias=False)  # C -> F
        self.up = nn.Linear(cfg.n_embd, cfg.ffn_dim, bias=False)  # C -> F
        self.down = nn.Linear(cfg.ffn_dim, cfg.n_embd, bias=False)  # F -> C

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [B, T, C]
        return self.down(torch.mul(F.silu(self.gate(x)), self.up(x)))  # [B, T, F] -> [B, T, C]


class Block(nn.Module):
    """x + attention(norm_1(x)), then + mlp(norm_2(·)): pre-norm residual."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.norm_1 = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.attention = Attention(cfg)
        self.norm_2 = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, allowed: torch.Tensor,
                cache: KVCache | None = None, layer: int = 0, keep_weights: bool = False) -> torch.Tensor:
        # x: [B, T, C]
        # torch.add, not `+`: each residual add is a node of the graph (the residual stream's "+")
        x = torch.add(x, self.attention(self.norm_1(x), cos, sin, allowed, cache, layer, keep_weights))  # [B, T, C]
        return torch.add(x, self.mlp(self.norm_2(x)))  # [B, T, C]


class Decoder(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)  # V -> C
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)  # C -> V
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight  # one [V, C] matrix, counted once
        self.inverse_frequencies: torch.Tensor
        self.register_buffer("inverse_frequencies",
                             rope_inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_freq_factors),
                             persistent=False)  # [D/2]

    def graph_params(self) -> dict[str, int | float | bool]:
        """The sizes an exported graph's group node carries (app/export/graph.py), so the page's words are this
        model's (the kind's views read them): the config, the head width and the parameter count."""
        cfg = self.cfg
        return {"n_layer": cfg.n_layer, "n_embd": cfg.n_embd, "n_head": cfg.n_head, "n_kv_head": cfg.n_kv_head,
                "head_dim": cfg.head_dim, "ffn_dim": cfg.ffn_dim, "vocab_size": cfg.vocab_size,
                "tie_embeddings": cfg.tie_embeddings, "qkv_bias": cfg.qkv_bias, "qk_norm": cfg.qk_norm,
                "rope_theta": cfg.rope_theta, "context_length": cfg.context_length,
                "parameters": sum(p.numel() for p in self.parameters())}  # a tied matrix once

    @classmethod
    def small(cls, seed: int = 0, n_layer: int = 2) -> Decoder:
        """A randomly initialised tiny model of the same architecture, for fast tests."""
        cfg = DecoderConfig(vocab_size=300, n_layer=n_layer, n_embd=64, n_head=4, n_kv_head=2, ffn_dim=160,
                          rope_theta=10000.0, rms_eps=1e-5, context_length=256, tie_embeddings=True)
        generator = torch.Generator().manual_seed(seed)
        model = cls(cfg)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("norm_1.weight") or name.endswith("norm_2.weight") or name == "norm.weight":
                    parameter.copy_(1.0 + 0.1 * torch.randn(parameter.shape, generator=generator))
                else:
                    parameter.copy_(0.08 * torch.randn(parameter.shape, generator=generator))
        return model

    def _run(self, ids: torch.Tensor, key_mask: torch.Tensor, positions: torch.Tensor,
             cache: KVCache | None = None, keep_attention_of: int | None = None) -> torch.Tensor:
        # ids, positions: [B, T]; key_mask: [B, S] (the cache's tokens, then these T)
        return self.lm_head(self._hidden(ids, key_mask, positions, cache, keep_attention_of))  # [B, T, V]

    def _hidden(self, ids: torch.Tensor, key_mask: torch.Tensor, positions: torch.Tensor,
                cache: KVCache | None = None, keep_attention_of: int | None = None) -> torch.Tensor:
        """The final norm's output [B, T, C]: what the LM head reads."""
        cos, sin = rope_cos_sin(positions, self.inverse_frequencies)  # each [B, 1, T, D]
        allowed = allowed_keys(key_mask, ids.shape[1])  # [B, 1, T, S]
        x = self.embed(ids)  # [B, T, C]
        for layer, block in enumerate(self.blocks):
            x = block(x, cos, sin, allowed, cache, layer, keep_weights=layer == keep_attention_of)  # [B, T, C]
        return self.norm(x)  # [B, T, C]

    def completion_logits(self, ids: torch.Tensor, prompt_length: int) -> torch.Tensor:
        """The logits [B, T, V] that predict each of the T = L − P tokens after a prompt all B rows share,
        equal to `forward(ids[:, :-1])[:, P - 1:]` up to float rounding, at about half the cost for a
        prompt as long as the completions: the prompt's P positions run once (batch 1, its keys and
        values then read by every row) and the LM head (V × C: 49,152 × 576 on a 135M model) runs on the
        T positions that are scored, not on the prompt's. Gradients reach every weight as through `forward`; the
        prompt's activations take the sum of the B rows' gradients. For passes no tracer records (the
        inner steps, log π_old, log π after the update): the recorded pass keeps `forward`'s shapes,
        which the graph's nodes are."""
        # ids: [B, L] = the shared prompt [P], then each row's completion [T]
        batch, length = ids.shape
        if prompt_length < 1 or length <= prompt_length:
            raise ValueError(f"need a prompt and at least one completion token, got P={prompt_length}, L={length}")
        if not bool((ids[:, :prompt_length] == ids[:1, :prompt_length]).all()):
            raise ValueError("completion_logits needs one prompt shared by every row")
        cache = KVCache(len(self.blocks))
        prompt = ids[:1, :prompt_length]  # [1, P]
        whole = torch.ones((1, prompt_length), dtype=torch.bool, device=ids.device)
        last_prompt = self._hidden(prompt, whole, positions_from_mask(whole), cache)[:, -1:]  # [1, 1, C]
        cache.expand(batch)  # every row reads the same prompt keys and values
        hidden = [last_prompt.expand(batch, -1, -1)]  # [B, 1, C]: predicts each row's first token
        if length - 1 > prompt_length:
            fed = ids[:, prompt_length:-1]  # [B, T - 1]: each token but the last predicts the next
            keys_seen = torch.ones((batch, length - 1), dtype=torch.bool, device=ids.device)  # [B, L - 1]
            positions = torch.arange(prompt_length, length - 1, device=ids.device).expand(batch, -1)  # [B, T - 1]
            hidden.append(self._hidden(fed, keys_seen, positions, cache))  # [B, T - 1, C]
        return self.lm_head(torch.cat(hidden, dim=1))  # [B, T, V]

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                positions: torch.Tensor | None = None, keep_attention_of: int | None = None) -> torch.Tensor:
        """Logits [B, T, V] for every position. `keep_attention_of=n` keeps block n's per-head attention
        weights in `blocks[n].attention.last_weights` ([B, H, T, T])."""
        # ids: [B, T]; attention_mask: [B, T] (1 real, 0 padding); positions: [B, T]
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        if positions is None:
            positions = positions_from_mask(attention_mask)
        return self._run(ids, attention_mask.bool(), positions, keep_attention_of=keep_attention_of)

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int, temperature: float,
                 generator: torch.Generator, eos_id: int, top_k: int | None = None,
                 pad_id: int | None = None,
                 on_token: Callable[[int], None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample up to `max_new_tokens` after each (left- or right-padded) prompt, with a KV cache, through
        the app's one sampling loop (generate.py: temperature 0 greedy, else a seeded draw over the `top_k`
        likeliest tokens when given). A row stops at its first `eos_id`, which it keeps; after it the row
        holds `pad_id` (default `eos_id`) with mask 0. Returns (new_ids [B, N], new_mask [B, N]).
        `on_token(n)` is called after the n-th new token of every row is drawn (a job's progress)."""
        pad = eos_id if pad_id is None else pad_id
        return generate(self.next_logits(attention_mask), ids, max_new_tokens, Draw(temperature, top_k), generator,
                        eos_id, pad, on_token)

    def next_logits(self, attention_mask: torch.Tensor) -> NextLogits:
        """The decoder as generate.py's NextLogits: the first call reads the prompt [B, T] (`attention_mask`
        [B, T] 1 on real tokens, padding left or right), each later call one new token per row [B, 1], through
        one KV cache."""
        cache = KVCache(len(self.blocks))
        key_mask = attention_mask.bool()  # [B, T], then [B, S]
        next_position = attention_mask.long().sum(dim=-1, keepdim=True)  # [B, 1]: right after the last real token

        def prompt_logits(ids: torch.Tensor) -> torch.Tensor:
            positions = positions_from_mask(attention_mask)  # [B, T]
            # with right padding the last real token is not the last column: take each row's own last logits
            last_real = torch.where(key_mask.any(dim=-1), key_mask.shape[1] - 1 - key_mask.flip(-1).long().argmax(-1),
                                    key_mask.shape[1] - 1)  # [B]
            batch = ids.shape[0]
            if batch > 1 and bool(key_mask.all()) and bool((ids == ids[:1]).all()):
                # one prompt for every row (a GRPO group): read it once, every row then reads its keys and values
                logits = self._run(ids[:1], key_mask[:1], positions[:1], cache).expand(batch, -1, -1)  # [B, T, V]
                cache.expand(batch)
            else:
                logits = self._run(ids, key_mask, positions, cache)  # [B, T, V]
            return logits[torch.arange(batch, device=ids.device), last_real]  # [B, V]

        def token_logits(token: torch.Tensor) -> torch.Tensor:
            nonlocal key_mask, next_position
            key_mask = torch.cat((key_mask, torch.ones_like(key_mask[:, :1])), dim=1)  # [B, S + 1]
            logits = self._run(token, key_mask, next_position, cache)  # [B, 1, V]
            next_position = next_position + 1
            return logits[:, -1]  # [B, V]

        def next_logits(new: torch.Tensor) -> torch.Tensor:
            return prompt_logits(new) if cache.length == 0 else token_logits(new)

        return next_logits
