"""The part of a walkthrough screen every kind shares, built from URL state (no web framework
here): the step and its navigation, the graph under the step's camera, the selected node's
inspector, and the links. A kind's screen extends Screen with what it computes and names the
templates that draw it (`parts`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from app.domain.snapshot import Snapshot, Step
from app.views.glossary import Segment, annotate
from app.views.graph import GraphView, build_graph_view
from app.views.graph_layout import ancestors
from app.views.inspector import InspectorView, build_inspector
from app.views.meaning import node_meaning
from app.views.story import StepStory
from app.views.urls import URLS
from app.views.view_state import ViewState
from app.views.walkthrough_list import ListedWalkthrough


@dataclass(frozen=True)
class GraphAnnotation:
    """A note drawn beside a node that is not itself a node of the snapshot."""
    label: str    # short, on the graph
    detail: str   # the full sentence, for the title and screen readers


@dataclass(frozen=True)
class Link:
    """A link the step panel offers: its words on the button, and a sentence saying where it leads."""
    label: str
    url: str
    sentence: str = ""


@dataclass(frozen=True)
class PartOf:
    """A walkthrough that is one of a series a kind keeps (a training run's recorded steps): the series'
    own page, this walkthrough's place in it, and its neighbours there. The step panel links them all,
    and the last step's Next leads on to the next one (or back to the series' page after the last)."""
    label: str            # where this walkthrough is, e.g. "Recorded step 60 of the run"
    home: Link            # the series' page
    previous: Link | None = None
    next: Link | None = None


UPLOAD = Link("your own run or snapshot", URLS.upload_form(), "Go on with your own run or snapshot")


@dataclass(frozen=True)
class Screen:
    snapshot: Snapshot
    state: ViewState[Any]  # a kind's screen narrows it to its own part (ViewState[ItsState])
    step_index: int
    graph: GraphView
    inspector: InspectorView | None
    annotations: Mapping[str, GraphAnnotation] = field(default_factory=dict)

    # What a kind adds, drawn by its own templates in the shared page's slots (templates/partials/
    # view.html): "lead" under the step text, "panels" under the inspector, "inspector" inside it
    # (where a node has no record), "record_head" before a record's tensors, "node_extra" after
    # them, "inspector_tail" closing it, "compare" the Compare panel (shown when the kind's page
    # passes a `compare` view).
    parts: ClassVar[Mapping[str, str]] = {}
    # What its last step leads on to on this page besides the next walkthrough: (the anchor of a
    # section the kind's page has, its words), or None
    leads_on: ClassVar[tuple[str, str] | None] = None
    runnable: ClassVar[bool] = False  # a kind's screen computes; a view-only one draws the file
    stories: ClassVar[Mapping[str, StepStory]] = {}  # per step id: what it teaches (views/story.py)
    result: Any = None  # what the kind recorded for this view (None: nothing ran)
    part_of: PartOf | None = None  # the series this walkthrough is one of (set by its kind's page)

    @property
    def framed_ids(self) -> list[str]:
        """What the fitted camera keeps whole in the frame (docs/design.md §2, "Graph layout"):
        the selected nodes and the open modules that hold none of them, as the URL draws them
        (so a copied URL gets the same camera); their direct neighbours are shown too when
        they fit at a readable zoom (the SVG's data-context)."""
        return list(self.graph.framed_ids)

    @property
    def story(self) -> StepStory | None:
        return self.stories.get(self.step.id)

    @property
    def step_focus(self) -> str | None:
        return self.story.focus if self.story else None

    @property
    def story_text(self) -> tuple[list[Segment], list[Segment], list[Segment]]:
        """The step's point (its headline), what explains it further, and the file's note, each term
        marked where the page first uses it."""
        story = self.story
        point, more, note = annotate([story.point if story else "", story.more if story else "", self.step.note])
        return point, more, note

    @property
    def headline(self) -> str:
        """The step's first line: the sentence it teaches; a step without a story has its file's title."""
        return self.story.point if self.story else self.step.title

    @property
    def form_refused(self) -> bool:
        """Whether the kind's form names a refused value (each kind's screen knows its form)."""
        return False

    @property
    def form_open(self) -> bool:
        """"Change the numbers" starts open on a step about a parameter, or when the form was refused."""
        return bool(self.story and self.story.form_open) or self.form_refused

    def next_walkthrough(self, others: Sequence[ListedWalkthrough] | None) -> ListedWalkthrough | None:
        """The walkthrough after this one in the featured order (the catalog's ranks, as `others` lists
        them): never an earlier one. None after the last (the reader's own run comes next, `onward`). An
        upload is not a chapter of the story: from one, the story's first walkthrough."""
        listed = list(others or ())
        here = next((i for i, w in enumerate(listed) if w.current), None)
        if here is None or not listed[here].builtin:
            return next((w for w in listed if w.builtin and not w.error and not w.current), None)
        return next((w for w in listed[here + 1:] if w.builtin and not w.error), None)

    def onward(self, others: Sequence[ListedWalkthrough] | None) -> Link | None:
        """Where the last step's Next leads: within a series, its next walkthrough, or back to the series'
        page after the last; else the next featured walkthrough, and after the last of those the upload
        page (your own run). Never back to an earlier chapter."""
        if self.part_of is not None:
            return self.part_of.next or self.part_of.home
        on = self.next_walkthrough(others)
        if on is not None:
            return Link(on.title, on.start_url, "Go on to the next walkthrough")
        return UPLOAD

    def tab_title(self, others: Sequence[ListedWalkthrough] | None = None) -> str:
        """The browser tab's title: the step's point (the headline the page shows), then the walkthrough's
        name as the lists give it. The export's own step title is shown on the page, labelled, not here."""
        here = next((w.title for w in others or () if w.current), None)
        name = here or self.snapshot.collaboration.walkthrough.title or self.snapshot.name
        return f"{self.headline} — {name} · GRPO walkthrough"

    @property
    def overview(self) -> bool:
        return self.state.overview

    def overview_toggle_url(self) -> str:
        return self.url(self.state.toggling_overview())

    @property
    def step(self) -> Step:
        return self.snapshot.steps[self.step_index]

    @property
    def step_count(self) -> int:
        return len(self.snapshot.steps)

    def url(self, state: ViewState | None = None) -> str:
        return (state or self.state).url(self.snapshot)

    def step_url(self, offset: int) -> str | None:
        i = self.step_index + offset
        if not 0 <= i < self.step_count:
            return None
        return self.url(self.state.at_step(self.snapshot, self.snapshot.steps[i].id))

    def step_urls(self) -> list[tuple[Step, str]]:
        return [(s, self.url(self.state.at_step(self.snapshot, s.id))) for s in self.snapshot.steps]

    def select_url(self, node_id: str) -> str:
        return self.url(self.state.selecting(node_id))

    def activate_url(self, module_id: str) -> str:
        """Clicking a module opens (or closes) it and shows it in the Inspector."""
        return self.url(self.state.toggled(module_id).selecting(module_id))

    @property
    def inactive(self) -> set[str]:
        """Nodes that take no part in what the kind shows: drawn dimmed."""
        return set()

    def path(self) -> str:
        return URLS.step(self.state.walkthrough_id, self.state.step_id)

    @property
    def expanded_differs(self) -> bool:
        return set(self.state.expanded) != set(self.step.view.expanded_module_ids)


def build_graph(snapshot: Snapshot, state: ViewState, shapes: dict[str, tuple[int, ...]] | None = None,
                annotations: Mapping[str, GraphAnnotation] | None = None) -> GraphView:
    """The view's graph, laid out by dot (app/views/graph_dot.py) with the URL's open modules and
    the kind's annotations (boxes of their own), its camera framing the selection; or the
    overview: every module closed, the whole fitted."""
    notes = {nid: a.label for nid, a in (annotations or {}).items()}
    step = snapshot.step(state.step_id)
    selected = [state.node] if state.node else []
    viewport = (step.view.viewport.width, step.view.viewport.height)
    if state.overview:
        return replace(build_graph_view(snapshot, (), selected, viewport=viewport, shapes=shapes, compact=True,
                                        notes=notes), fit_all=True)
    holds = {a for n in selected if n in snapshot.node_map for a in ancestors(snapshot, n)}
    framed = [*selected, *(m for m in state.expanded if m not in holds)]
    return build_graph_view(snapshot, state.expanded, selected, framed=framed, viewport=viewport, shapes=shapes,
                            notes=notes)


def build_view_only_screen(snapshot: Snapshot, state: ViewState) -> Screen:
    """A walkthrough no kind runs: the file's graph, steps and words, no numbers."""
    inspector = build_inspector(snapshot, state.node, node_meaning(snapshot, state.node), None,
                                state.step_id) if state.node else None
    return Screen(snapshot, state, snapshot.step_index(state.step_id), build_graph(snapshot, state), inspector)
