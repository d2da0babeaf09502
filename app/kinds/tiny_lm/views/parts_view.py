"""The tiny LM's KL step: ∂loss/∂log π of some tokens as its two parts, the clipped advantage term's
and the KL penalty's (the engine's grad_surrogate and grad_kl), so the step's claim, that the KL
pulls every token clipped or not, shows on the clipped tokens (their surrogate part is 0)."""
from __future__ import annotations

from app.kinds.tiny_lm.engine.token_records import TokenStepResult
from app.views.charts.gradient_parts import PARTS_WORDS, PartRow, PartsChart, kl_part_sentence, parts_chart

MAX_ROWS = 12
MAX_CLIPPED = 8  # those the KL pulls hardest; the rest of the rows: the unclipped it pulls hardest, for contrast


def kl_parts_chart(result: TokenStepResult) -> PartsChart | None:
    tokens = [(i, t, tok) for i, c in enumerate(result.completions) for t, tok in enumerate(c.tokens)]
    if not tokens:
        return None
    clipped = sorted((x for x in tokens if x[2].clip_active), key=lambda x: -abs(x[2].grad_kl))[:MAX_CLIPPED]
    others = sorted((x for x in tokens if not x[2].clip_active), key=lambda x: -abs(x[2].grad_kl))
    picked = sorted(clipped + others[:MAX_ROWS - len(clipped)], key=lambda x: (x[0], x[1]))
    rows = tuple(PartRow(f"#{i} token {t} “{tok.text}”" + (" ✂" if tok.clip_active else ""), tok.grad_surrogate,
                         tok.grad_kl, tok.grad, tok.clip_active, f"{i}:{t}") for i, t, tok in picked)
    c = result.params
    n_clipped = sum(1 for x in tokens if x[2].clip_active)
    which = ((f"the {len(clipped)} of the {n_clipped} clipped tokens (✂) the KL term pulls hardest"
              if n_clipped > len(clipped) else
              f"the {len(clipped)} clipped token{'s' if len(clipped) != 1 else ''} (✂)") + " and the "
             if clipped else "no clipped token (there is none here): the ")
    which += f"{len(picked) - len(clipped)} unclipped tokens the KL term pulls hardest, of {len(tokens)} tokens."
    kl = kl_part_sentence(c.kl_placement, c.beta, "token", "token", "pulls it toward the reference")
    caption = (f"∂loss/∂log π of {which} {PARTS_WORDS} {kl} The JSON API has both parts of every token "
               "(grad_surrogate, grad_kl).")
    return parts_chart(rows, caption)
