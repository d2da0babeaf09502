"""The policy's optimiser as TRL's trainer (transformers' Trainer) runs it: AdamW with its parameter groups,
the gradient clipped to max_grad_norm before each step, and the gradient norms the step reports."""
from __future__ import annotations

import torch

from app.engine.lm.decoder import Decoder, RMSNorm
from app.kinds.smollm.engine.params import SmolParams


def block_grad_norms(policy: Decoder) -> tuple[tuple[float, ...], dict[str, float], float]:
    """sqrt(Σ ‖∂loss/∂W‖²) over each block's parameters, the rest's (embedding = LM head when tied, final
    norm) and all of them, in float64."""
    def norm(module: torch.nn.Module) -> float:
        squares = [p.grad.double().pow(2).sum() for p in module.parameters() if p.grad is not None]
        return float(torch.stack(squares).sum().sqrt()) if squares else 0.0
    blocks = tuple(norm(block) for block in policy.blocks)
    others = {"embed": norm(policy.embed), "norm": norm(policy.norm)}
    if not policy.cfg.tie_embeddings:
        others["lm_head"] = norm(policy.lm_head)
    return blocks, others, float(sum(v * v for v in (*blocks, *others.values())) ** 0.5)


def adamw(policy: Decoder, params: SmolParams) -> torch.optim.AdamW:
    """AdamW as transformers' Trainer builds it from TrainingArguments (Trainer.create_optimizer): lr,
    betas (adam_beta1, adam_beta2), eps adam_epsilon, and weight decay on every weight but the norms'
    gains and biases (Trainer.get_decay_parameter_names leaves out biases and LayerNorm/RMSNorm weights;
    a Qwen2 file has q/k/v biases)."""
    gains = {id(p) for module in policy.modules() if isinstance(module, RMSNorm) for p in module.parameters()}
    gains |= {id(p) for name, p in policy.named_parameters() if name.endswith(".bias")}
    decayed = [p for p in policy.parameters() if id(p) not in gains]
    kept = [p for p in policy.parameters() if id(p) in gains]
    return torch.optim.AdamW([{"params": decayed, "weight_decay": params.weight_decay},
                              {"params": kept, "weight_decay": 0.0}],
                             lr=params.learning_rate, betas=(params.adam_beta1, params.adam_beta2),
                             eps=params.adam_epsilon)


def clip_gradient(policy: Decoder, max_grad_norm: float) -> float:
    """Scale the policy's gradient to an L2 norm of at most `max_grad_norm` (0: leave it), as transformers'
    Trainer does before each optimiser step (`if self.args.max_grad_norm > 0: grad_norm =
    self._clip_grad_norm(model)`: clip_grad_norm_(model.parameters(), max_grad_norm)); returns the norm before
    clipping, as Trainer logs it (`grad_norm`).

    torch's clip_grad_norm_ is get_total_norm, then clip_grads_with_norm_ (each gradient times
    max_norm / (norm + 1e-6) when that is < 1). The norm is taken here in float64 and handed to
    clip_grads_with_norm_: torch's float32 norm of the 28M-entry embedding's gradient is off by ~2e-5
    relative on the CPU (with it, a gradient clipped to max_grad_norm 1 measured 1.000022 on the real model)."""
    total = gradient_norm(policy)
    if max_grad_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(policy.parameters(), max_grad_norm,
                                             torch.tensor(total, dtype=torch.float64))
    return total


def gradient_norm(policy: Decoder) -> float:
    """‖∂loss/∂θ‖₂ over every parameter of the policy, in float64 (tied weights counted once)."""
    squares = [p.grad.double().pow(2).sum() for p in policy.parameters() if p.grad is not None]
    return float(torch.stack(squares).sum().sqrt()) if squares else 0.0
