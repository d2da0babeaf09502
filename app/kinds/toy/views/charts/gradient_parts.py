"""The toy's reference step: each answer's ∂loss/∂log π as its two parts, the clipped advantage
term's and the KL penalty's (the engine's grad_surrogate and grad_kl), so the step's claim, that the
KL term still moves an answer the clip has cut, shows on the clipped rows."""
from __future__ import annotations

from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.views.meaning import choice_label
from app.views.charts.gradient_parts import PARTS_WORDS, PartRow, PartsChart, parts_chart
from app.views.numbers import param

MAX_ROWS = 16  # the JSON API has every row


def toy_parts_chart(result: StepResult) -> PartsChart | None:
    samples = result.samples
    if not samples or "grad_kl" not in samples[0]:
        return None
    c = result.params.conventions()
    rows = tuple(
        PartRow(f"{i}: {choice_label(result.prompt, s['action'])}" + (" ✂" if s.get("clip_active") else ""),
                s["grad_surrogate"], s["grad_kl"], s["grad_logp"], bool(s.get("clip_active")), str(i))
        for i, s in enumerate(samples[:MAX_ROWS]))
    shown = ("" if len(samples) <= MAX_ROWS
             else f" The first {MAX_ROWS} of {len(samples)} answers; the JSON API has all.")
    if c.kl_placement == "reward" or c.beta == 0:
        kl = ("Here the KL sits in the reward (a constant of π_old), so its part is 0 on every row."
              if c.kl_placement == "reward" else "Here β = 0, so the KL part is 0 on every row.")
    else:
        kl = (f"On a clipped row (✂) the first part is exactly 0, yet the hatched part is not: with β = "
              f"{param(c.beta)} the KL penalty still moves that answer.")
    caption = (f"Each answer's ∂loss/∂log π. {PARTS_WORDS} {kl} Gradient descent moves log π against the total: "
               f"a negative total makes the answer more likely.{shown}")
    return parts_chart(rows, caption)
