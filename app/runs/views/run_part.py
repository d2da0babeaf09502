"""A run's recorded step, opened from the run explorer as its own walkthrough: where it sits in its run. The
step panel links back to the run (at this step) and to the recorded steps before and after it, and the
walkthrough's last step leads on to the next recorded step, or back to the run after the last
(app/views/screen.py's PartOf, drawn by the shared step panel)."""
from __future__ import annotations

from collections.abc import Mapping

from app.runs.views import urls
from app.views.screen import Link, PartOf
from app.views.urls import URLS


def run_part(run_id: str, step: int, recorded: Mapping[int, str]) -> PartOf:
    """`recorded`: step -> walkthrough id of the run's recorded steps, `step` among them."""
    steps = sorted(recorded)
    at = steps.index(step)

    def neighbour(i: int, sentence: str) -> Link | None:
        if not 0 <= i < len(steps):
            return None
        return Link(f"recorded step {steps[i]}", URLS.walkthrough(recorded[steps[i]]), sentence)

    home = Link("the run's explorer", urls.run(run_id, {"step": step}) + "#selected-step",
                f"Go back to the run, at step {step}")
    return PartOf(f"Recorded step {step} of a run ({at + 1} of {len(steps)} recorded)", home,
                  neighbour(at - 1, "Go back to the run's recorded step before this one"),
                  neighbour(at + 1, "Go on to the run's next recorded step"))
