"""Why a completion moved the way it did in the update step: the update re-run on parts of the loss
(the per-token gradient's own split into the surrogate's push and the KL term's pull is
engine/grpo/gradient_parts.py's).

The loss is a sum over completions, loss = Σ_i loss_i with loss_i = −Σ_t w_it·(L − β·K)_it, but
the completions share every weight of the model, and AdamW's step is not linear in the gradient:
it adds β1·m of the earlier steps (momentum) and divides by √v (each weight's running gradient
size). So a completion pushed down by its own terms can still rise. We measure it: the same
AdamW step, from the same weights and optimiser state, on
- no terms at all (what the optimiser's memory of the μ earlier steps does by itself),
- only completion i's terms, and the same without its KL term,
- every term except completion i's,
and the change of Σ_t log π(o_i,t) each gives. Float64 throughout, like the rest of the engine.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from app.engine.grpo.params import Conventions
from app.engine.grpo.token_step import token_grpo_step

M = TypeVar("M", bound=torch.nn.Module)


@dataclass(frozen=True)
class UpdatePart:
    """Σ_t Δ log π of one completion after one AdamW step on part of the loss."""
    all_terms: float  # the real update: every completion's terms
    momentum_only: float  # no terms: the optimiser's running averages alone
    own: float  # only this completion's terms (surrogate and KL)
    own_surrogate: float  # only this completion's surrogate, no KL term
    others: float  # every completion's terms but this one's


def update_parts(policy: M, optimiser: torch.optim.AdamW, score: Callable[[M], torch.Tensor],
                 logp_old: torch.Tensor, logp_ref: torch.Tensor,
                 rewards: torch.Tensor, mask: torch.Tensor, c: Conventions) -> tuple[UpdatePart, ...]:
    """Each completion's Σ Δ log π under the update on every term, none, its own, its own
    without KL, and the others'. `policy` and `optimiser` are left as they were."""
    weights = copy.deepcopy(policy.state_dict())
    state = copy.deepcopy(optimiser.state_dict())
    trial = copy.deepcopy(policy)
    trial_opt = torch.optim.AdamW(trial.parameters())  # its settings come with the state below
    g = mask.shape[0]

    def moved(rows: torch.Tensor, with_kl: bool) -> torch.Tensor:  # (G,) Σ_t Δ log π
        trial.load_state_dict(weights)
        trial_opt.load_state_dict(copy.deepcopy(state))
        trial_opt.zero_grad()
        logp = score(trial)
        step = token_grpo_step(logp, logp_old, logp_ref, rewards, mask, c)
        terms = step.per_token if with_kl else step.surrogate
        (-(step.weights * terms * rows.unsqueeze(-1)).sum()).backward()
        trial_opt.step()
        with torch.no_grad():
            after = score(trial)
        return ((after - logp.detach()) * mask).sum(-1)

    ones = torch.ones(g, dtype=mask.dtype, device=mask.device)
    every = moved(ones, True)
    memory = moved(torch.zeros_like(ones), True)
    out = []
    for i in range(g):
        own = torch.zeros_like(ones)
        own[i] = 1
        out.append(UpdatePart(float(every[i]), float(memory[i]), float(moved(own, True)[i]),
                              float(moved(own, False)[i]), float(moved(ones - own, True)[i])))
    return tuple(out)
