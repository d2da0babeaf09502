"""The walkthroughs the app offers, each with what it teaches: the home page's list and the
switch above every walkthrough. The built-in ones have a sentence written here; any other
export (an upload, a file dropped in the folder) is listed by its own title."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.catalog import CatalogEntry
from app.views.urls import URLS

TEACHES = {
    "toy_grpo": ("The GRPO objective, number by number",
                 "A four-choice toy policy: group advantages, the policy ratio, the clipped surrogate and the "
                 "KL penalty on one-token answers, with the conventions of the paper, TRL, verl, Dr. GRPO and "
                 "DAPO side by side, and the R1-Zero, R1 and distillation paths. Start here."),
    "tiny_lm_grpo": ("GRPO on real text, token by token",
                     "A tiny transformer answering additions in two scripts: completions of different lengths, "
                     "padding masks, per-token ratios, clips and KL, R1's accuracy, format and language rewards, "
                     "how the aggregation over tokens biases by length, and attention maps."),
}
ORDER = ("toy_grpo", "tiny_lm_grpo")


@dataclass(frozen=True)
class ListedWalkthrough:
    id: str
    title: str
    teaches: str
    url: str
    steps: int
    error: str | None
    current: bool
    start_url: str = ""  # its first step: where the story starts (`url` opens the export's own opening view)
    builtin: bool = False  # one of ours (TEACHES): a last step leads on to these only


def list_walkthroughs(entries: list[CatalogEntry], current: str | None = None) -> list[ListedWalkthrough]:
    rank = {wid: i for i, wid in enumerate(ORDER)}
    listed = []
    for e in sorted(entries, key=lambda e: (rank.get(e.id, len(ORDER)), e.id)):
        title, teaches = TEACHES.get(e.id, (None, None))
        own_title = e.snapshot.collaboration.walkthrough.title if e.snapshot else e.source
        start = URLS.step(e.id, e.snapshot.steps[0].id) if e.snapshot and e.snapshot.steps else URLS.walkthrough(e.id)
        listed.append(ListedWalkthrough(e.id, title or own_title, teaches or own_title, URLS.walkthrough(e.id),
                                        len(e.snapshot.steps) if e.snapshot else 0, e.error, e.id == current, start,
                                        e.id in TEACHES))
    return listed
