"""What a finished step keeps of its tensors for the page and the API: every answer's per-token numbers and
the tokens the update moved most."""
from __future__ import annotations

from app.engine.grpo.token_records import TokenRecord
from app.engine.lm.loaded import LoadedModel
from app.engine.lm.sampling import SampledGroup
from app.kinds.smollm.engine.step_records import SmolCompletion, TokenMove

TOP_MOVED = 10


def token_text(loaded: LoadedModel, token: int) -> str:
    return loaded.tokenizer.decode([token], skip_special_tokens=False)


def completion_records(loaded, group: SampledGroup, parts, rewards, logp, logp_old, logp_ref, columns, grad_logp,
                       grad_parts, logp_after) -> tuple[SmolCompletion, ...]:
    """Each answer's record: its ids and text, and every token's numbers from the step's tensors (G, T)."""
    lists = {k: v.cpu().tolist() for k, v in columns.items()}
    lp, lo, lr = logp.cpu().tolist(), logp_old.cpu().tolist(), logp_ref.cpu().tolist()
    grads, after = grad_logp.cpu().tolist(), logp_after.cpu().tolist()
    from_surrogate, from_kl = (g.cpu().tolist() for g in grad_parts)
    rows = []
    for i, text in enumerate(group.texts):
        n = int(group.mask[i].sum())
        ids = [int(t) for t in group.ids[i, group.prompt_length:group.prompt_length + n]]
        tokens = tuple(TokenRecord(
            token_text(loaded, ids[t]), lp[i][t], lo[i][t], lr[i][t], lists["ratio"][i][t],
            bool(lists["clip_active"][i][t]), bool(lists["dual_clip_hit"][i][t]), lists["kl"][i][t],
            lists["kl_term"][i][t], lists["per_token"][i][t], lists["weights"][i][t], grads[i][t], after[i][t],
            from_surrogate[i][t], from_kl[i][t]) for t in range(n))
        rows.append(SmolCompletion(text, tuple(ids), tokens, dict(parts[i]), float(rewards[i]),
                                   float(lists["reward_used"][i]), float(lists["advantages"][i]), group.stopped[i]))
    return tuple(rows)


def moved_most(completions: tuple[SmolCompletion, ...]) -> tuple[TokenMove, ...]:
    """The TOP_MOVED tokens whose log π moved most in the update, largest |Δ| first."""
    moves = [TokenMove(i, t, token.text, token.logp, token.logp_after)
             for i, completion in enumerate(completions) for t, token in enumerate(completion.tokens)]
    return tuple(sorted(moves, key=lambda m: abs(m.delta), reverse=True)[:TOP_MOVED])
