"""A recorded step's ∂loss/∂log π in its two parts, the clipped advantage term's and the KL
penalty's (engine/step.py's grad_surrogate and grad_kl), as stacked bars: on the KL step for
some tokens of the group, and on the what-if for the tokens whose push changes sign, each under the
record's conventions and the what-if's, so the reader sees which part turned it."""
from __future__ import annotations

import numpy as np

from app.kinds.step_record.engine.step import Recomputed
from app.views.charts.gradient_parts import PARTS_WORDS, PartRow, PartsChart, parts_chart
from app.views.numbers import param
from app.views.tokens.metrics import visible

MAX_ROWS = 12
MAX_CLIPPED = 8  # the rest: the unclipped tokens the KL pulls hardest, for contrast
MAX_SIGN_TOKENS = 5  # two rows each (recorded, what-if)


def _label(tokens: list[list[str]], r: Recomputed, k: int, t: int, clipped: bool) -> str:
    c = r.completions[k]
    return f"#{c.index} token {t + 1} “{visible(tokens[k][t])}”" + (" ✂" if clipped else "")


def _clipped(r: Recomputed, k: int) -> np.ndarray:
    c = r.completions[k]
    return (c.clip_low | c.clip_high).astype(bool)


def kl_parts_chart(r: Recomputed, group: int, tokens: list[list[str]]) -> PartsChart | None:
    """Some tokens of `group`: its clipped ones (up to MAX_CLIPPED, those the KL pulls hardest), then the
    unclipped the KL pulls hardest; in reading order."""
    places = [(k, t) for k, c in enumerate(r.completions) if c.group == group for t in range(len(c.grad))]
    if not places:
        return None
    def pull(p: tuple[int, int]) -> float:  # the KL part's size: the hardest pulled first
        return -abs(float(r.completions[p[0]].grad_kl[p[1]]))
    clipped = sorted(((k, t) for k, t in places if _clipped(r, k)[t]), key=pull)
    others = sorted(((k, t) for k, t in places if not _clipped(r, k)[t]), key=pull)
    shown = clipped[:MAX_CLIPPED]
    picked = sorted(shown + others[:MAX_ROWS - len(shown)])
    rows = tuple(_row(r, tokens, k, t) for k, t in picked)
    c = r.conventions
    which = ((f"the {len(shown)} of the {len(clipped):,} clipped tokens (✂) the KL term pulls hardest"
               if len(clipped) > len(shown) else
              f"the {len(shown)} clipped token{'s' if len(shown) != 1 else ''} (✂)") + " and the "
             if shown else "no clipped token (there is none in this group): the ")
    which += (f"{len(picked) - len(shown)} unclipped tokens the KL term pulls hardest, of {len(places):,} "
              f"in group {group}.")
    if c.kl_placement == "reward" or c.beta == 0:
        kl = ("This run's KL sits in the reward, so its part is 0 on every token." if c.kl_placement == "reward"
              else "This run has β = 0, so the KL part is 0 on every token.")
    elif not any(row.kl for row in rows):
        kl = "The KL part is 0 on these tokens: the record's reference log-probs equal the policy's (or are absent)."
    else:
        kl = (f"On a clipped token the first part is exactly 0, yet the hatched part is not: with β = "
              f"{param(c.beta)} the KL penalty still pulls it toward the reference.")
    return parts_chart(rows, f"∂loss/∂log π of {which} {PARTS_WORDS} {kl} The JSON API has both parts of every "
                             "token (grad_surrogate, grad_kl).")


def _row(r: Recomputed, tokens: list[list[str]], k: int, t: int, prefix: str = "") -> PartRow:
    c = r.completions[k]
    clipped = bool(_clipped(r, k)[t])
    label = prefix or _label(tokens, r, k, t, clipped)
    if prefix and clipped:
        label += " ✂"
    return PartRow(label, float(c.grad_surrogate[t]), float(c.grad_kl[t]), float(c.grad[t]), clipped, f"{k}:{t}")


def sign_change_chart(own: Recomputed, other: Recomputed, tokens: list[list[str]]) -> PartsChart | None:
    """The tokens whose ∂loss/∂log π changes sign under the what-if (the compare table's count, by the same
    rule), those that change most first: each as two rows, recorded and what-if, in their two parts."""
    flips: list[tuple[float, int, int]] = []
    for k, (m, o) in enumerate(zip(own.completions, other.completions, strict=True)):
        change = o.grad - m.grad  # the compare table's own arithmetic, so the two counts agree
        for at in np.flatnonzero((np.sign(m.grad) != np.sign(m.grad + change)) & (m.grad != 0)):
            flips.append((abs(float(change[at])), k, int(at)))
    if not flips:
        return None
    flips.sort(key=lambda f: (-f[0], f[1], f[2]))
    rows = []
    for _, k, t in flips[:MAX_SIGN_TOKENS]:
        head = _label(tokens, own, k, t, False)
        rows.append(_row(own, tokens, k, t, f"{head}, recorded"))
        rows.append(_row(other, tokens, k, t, "  … what if"))
    n = len(flips)
    shown = min(n, MAX_SIGN_TOKENS)
    caption = (f"{n:,} token{'s' if n != 1 else ''} change sign under the what-if; the {shown} that change most, "
               f"each under the record's conventions and then the what-if's. {PARTS_WORDS} Which part changed "
               "says why the push turned: a part that vanishes (β = 0: no KL part; a clip that binds: no "
               "surrogate part) or one the new advantages reverse.")
    return parts_chart(tuple(rows), caption)
