"""The toy's reference step: each answer's ∂loss/∂log π as its two parts, the clipped advantage
term's and the KL penalty's (the engine's grad_surrogate and grad_kl), so the step's claim, that the
KL term still moves an answer the clip has cut, shows on the clipped rows."""
from __future__ import annotations

from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.views.meaning import choice_label
from app.views.charts.gradient_parts import PARTS_WORDS, PartRow, PartsChart, kl_part_sentence, parts_chart

MAX_ROWS = 16  # the JSON API has every row


def toy_parts_chart(result: StepResult) -> PartsChart | None:
    samples = result.samples
    if not samples or "grad_kl" not in samples[0]:
        return None
    c = result.conventions
    rows = tuple(
        PartRow(f"{i}: {choice_label(result.prompt, s['action'])}" + (" ✂" if s.get("clip_active") else ""),
                s["grad_surrogate"], s["grad_kl"], s["grad_logp"], bool(s.get("clip_active")), str(i))
        for i, s in enumerate(samples[:MAX_ROWS]))
    shown = ("" if len(samples) <= MAX_ROWS
             else f" The first {MAX_ROWS} of {len(samples)} answers; the JSON API has all.")
    kl = kl_part_sentence(c.kl_placement, c.beta, "row", "row (✂)", "moves that answer")
    caption = (f"Each answer's ∂loss/∂log π. {PARTS_WORDS} {kl} Gradient descent moves log π against the total: "
               f"a negative total makes the answer more likely.{shown}")
    return parts_chart(rows, caption)
