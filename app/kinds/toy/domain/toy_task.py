"""The toy task: six prompts, four choices each, and what each choice stands for.

A prompt is a 3-feature vector with one correct choice out of four, so that
"accuracy" means something. The four choices are the toy's analogue of
DeepSeek-R1's completions (docs/design.md §4).
"""
from __future__ import annotations

from dataclasses import dataclass

ROLES = ("correct", "mixed", "unformatted", "wrong")
ROLE_LABELS = {"correct": "readable correct", "mixed": "mixed-language correct",
               "unformatted": "right but unformatted", "wrong": "wrong"}


@dataclass(frozen=True)
class ToyPrompt:
    """A prompt and what its four choices stand for, counted from the correct one.

    correct:     right final answer, readable reasoning inside <think>...</think>
    mixed:       right final answer, reasoning that mixes languages (R1-Zero's known flaw)
    unformatted: ignores the template, so no answer can be parsed
    wrong:       wrong final answer, well formatted
    The GRPO walkthrough's own reward pays for `correct` only.
    """
    features: tuple[float, float, float]
    correct: int

    def role(self, choice: int) -> str:
        return ROLES[(choice - self.correct) % len(ROLES)]


TOY_PROMPTS: tuple[ToyPrompt, ...] = (
    ToyPrompt((1.0, -0.5, 0.25), correct=2),
    ToyPrompt((-0.8, 0.6, 0.1), correct=0),
    ToyPrompt((0.3, 0.9, -0.7), correct=1),
    ToyPrompt((-0.2, -0.9, 0.8), correct=3),
    ToyPrompt((0.7, 0.4, 0.9), correct=2),
    ToyPrompt((-0.6, -0.3, -0.9), correct=1),
)
