"""The start of the story (`/`): what GRPO is for and what the first walkthrough is (its kind's
`Featured.intro`), in a few sentences, then a clear start at its step 1 (docs/design.md, "The
story"). The export's own opening view stays one link away: /walkthroughs/{id}."""
from __future__ import annotations

from dataclasses import dataclass

from app.domain.catalog import CatalogEntry, Featured
from app.views.glossary import TERMS, Segment, Term, annotate
from app.views.urls import URLS
from app.views.walkthrough_list import ListedWalkthrough, list_walkthroughs

WHY = ("DeepSeek-R1 learned to reason by reinforcement learning with GRPO: for each prompt the model writes a "
       "group of answers, a rule gives each a reward, and each answer is made more or less likely by how it "
       "scored against the rest of its group. There is no critic, no second network guessing how good an "
       "answer is: the group's mean is the baseline.")


@dataclass(frozen=True)
class StepLink:
    number: int
    headline: str    # the sentence the step teaches, or the file's title where no kind says
    url: str
    opening: bool  # the export's own opening view


@dataclass(frozen=True)
class Home:
    why: list[Segment]
    intro: list[Segment]  # the first walkthrough's own sentences (empty for one no kind features)
    first: ListedWalkthrough
    start_url: str
    opening_url: str      # the export's opening view
    opening_number: int   # its step number (1-based)
    steps: tuple[StepLink, ...]
    others: tuple[ListedWalkthrough, ...]
    glossary: tuple[Term, ...] = TERMS


def build_home(entry: CatalogEntry, entries: list[CatalogEntry], featured: tuple[Featured, ...] = ()) -> Home:
    snapshot = entry.snapshot
    assert snapshot is not None, "the default walkthrough is a loaded one"
    listed = list_walkthroughs(entries, featured, entry.id)
    own = next((f for f in featured if f.walkthrough_id == entry.id), None)
    intro, points = (own.intro, dict(own.points)) if own else ("", {})
    first = next(w for w in listed if w.id == entry.id)
    opening = snapshot.opening_step_id
    steps = tuple(StepLink(i + 1, points.get(s.id, s.title), URLS.step(entry.id, s.id), s.id == opening)
                  for i, s in enumerate(snapshot.steps))
    why, intro_segments = annotate([WHY, intro], prefix="home")
    return Home(why, intro_segments if intro else [], first, steps[0].url, URLS.walkthrough(entry.id),
                next(s.number for s in steps if s.opening), steps,
                tuple(w for w in listed if w.id != entry.id and not w.error))
