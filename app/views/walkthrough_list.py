"""The walkthroughs the app offers, each with what it teaches: the home page's list and the
switch above every walkthrough. A kind's own (`Featured`, from its manifest) come first with its
sentence; any other export (an upload, a file dropped in the folder) is listed by its own title."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.catalog import CatalogEntry, Featured
from app.views.urls import URLS


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
    builtin: bool = False  # a kind's own (Featured): a last step leads on to these only


def list_walkthroughs(entries: list[CatalogEntry], featured: tuple[Featured, ...] = (),
                      current: str | None = None) -> list[ListedWalkthrough]:
    ours = {f.walkthrough_id: f for f in featured}
    last = max((f.rank for f in featured), default=0) + 1
    listed = []
    for e in sorted(entries, key=lambda e: (ours[e.id].rank if e.id in ours else last, e.id)):
        title, teaches = (ours[e.id].headline, ours[e.id].teaches) if e.id in ours else (None, None)
        own_title = e.snapshot.collaboration.walkthrough.title if e.snapshot else e.source
        start = URLS.step(e.id, e.snapshot.steps[0].id) if e.snapshot and e.snapshot.steps else URLS.walkthrough(e.id)
        listed.append(ListedWalkthrough(e.id, title or own_title, teaches or own_title, URLS.walkthrough(e.id),
                                        len(e.snapshot.steps) if e.snapshot else 0, e.error, e.id == current, start,
                                        e.id in ours))
    return listed
