"""What one step of a walkthrough teaches (docs/design.md, "The story").

A kind names, per step id, the one sentence the step teaches (the page's headline; what
explains it further folds under it, so that on a phone the figure still fills the first view),
the figure that proves it
(`data-step-focus` on the page, drawn in the first view next to the sentence) and whether the
step is about a parameter (its form then opens, that parameter first). A step without a story
(a view-only walkthrough) shows its file's note alone.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepStory:
    point: str                      # the one sentence, in the learner's words: the step's headline
    focus: str                      # the figure's name: data-step-focus="<focus>"
    form_open: bool = False         # the step is about a parameter: "Change the numbers" starts open
    step_fields: tuple[str, ...] = ()  # the step's own parameters, shown first in the form
    evidence: str = ""              # where on the first screen the proof is (docs and tests read it)
    more: str = ""                  # what explains the point further, folded under the headline
