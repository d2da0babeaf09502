"""Everything a screen shows, as URL state: the server keeps none.

A view is (walkthrough, step, expanded modules, selected node, overview) plus the kind's own
part (`own`: its parameters and what else its URL holds),
typed by the kind and written into the URL by it. `expanded` and `node` appear in the URL only
when they differ from the step's saved view, so a step's plain URL is its saved view and a
copied URL reopens exactly what was on screen.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar, cast

from app.domain.snapshot import Snapshot
from app.views.urls import URLS

OVERVIEW = "overview"  # the value of ?view= that shows the whole model


class UnknownViewPart(LookupError):
    """A URL names a step, node or module the walkthrough does not have."""


class KindState(Protocol):
    """A kind's own part of the view: frozen, and written into the URL by itself."""

    def query(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class NoKindState:
    """A view-only walkthrough: nothing runs, so the URL carries nothing more."""

    def query(self) -> dict[str, str]:
        return {}


K = TypeVar("K", bound=KindState)


@dataclass(frozen=True)
class ViewState(Generic[K]):
    """`own` is the kind's own part, typed by it: a kind's screen reads a ViewState[ItsOwnState]."""
    walkthrough_id: str
    step_id: str
    expanded: tuple[str, ...]
    node: str | None
    overview: bool
    own: K

    @classmethod
    def parse(cls, snapshot: Snapshot, walkthrough_id: str, step_id: str, *,
              expanded: str | None, node: str | None, view: str | None = None,
              own: K) -> ViewState[K]:
        try:
            step = snapshot.step(step_id)
        except KeyError:
            known = ", ".join(s.id for s in snapshot.steps)
            raise UnknownViewPart(
                f"Walkthrough {walkthrough_id!r} has no step {step_id!r}. Its steps: {known}.") from None
        if expanded is None:
            open_modules = tuple(step.view.expanded_module_ids)
        else:
            open_modules = tuple(dict.fromkeys(m for m in expanded.split(",") if m))
            module_ids = {m.node_id for m in snapshot.modules}
            for m in open_modules:
                if m not in module_ids:
                    raise UnknownViewPart(f"Walkthrough {walkthrough_id!r} has no module {m!r} to expand.")
        if node is not None and node not in snapshot.node_ids:
            raise UnknownViewPart(f"Walkthrough {walkthrough_id!r} has no node {node!r}.")
        saved = step.view.selected_node_ids
        selected = node if node is not None else (saved[0] if saved else None)
        return ViewState(walkthrough_id, step_id, open_modules, selected, view == OVERVIEW, own)

    @classmethod
    def for_step(cls, snapshot: Snapshot, walkthrough_id: str, step_id: str, own: K) -> ViewState[K]:
        return ViewState.parse(snapshot, walkthrough_id, step_id, expanded=None, node=None, own=own)

    def query(self, snapshot: Snapshot) -> dict[str, str]:
        step = snapshot.step(self.step_id)
        q: dict[str, str] = {}
        if set(self.expanded) != set(step.view.expanded_module_ids):
            q["expanded"] = ",".join(self.expanded)
        default_node = step.view.selected_node_ids[0] if step.view.selected_node_ids else None
        if self.node != default_node and self.node is not None:
            q["node"] = self.node
        q.update(self.own.query())
        if self.overview:
            q["view"] = OVERVIEW
        return q

    def url(self, snapshot: Snapshot) -> str:
        return URLS.step(self.walkthrough_id, self.step_id, self.query(snapshot))

    def toggled(self, module_id: str) -> ViewState[K]:
        if module_id in self.expanded:
            return replace(self, expanded=tuple(m for m in self.expanded if m != module_id))
        return replace(self, expanded=(*self.expanded, module_id))

    def selecting(self, node_id: str) -> ViewState[K]:
        """Selecting a node leaves the overview: the node is inspected in the step's view."""
        return replace(self, node=node_id, overview=False)

    def toggling_overview(self) -> ViewState[K]:
        return replace(self, overview=not self.overview)

    def at_step(self, snapshot: Snapshot, step_id: str) -> ViewState[K]:
        """Another step opens at its own saved view; the kind's part (parameters, path) travels along."""
        return ViewState.for_step(snapshot, self.walkthrough_id, step_id, self.own)

    def with_own(self, **changes: Any) -> ViewState[K]:
        """The same view with some of the kind's own values changed (a kind's part is a dataclass)."""
        return replace(self, own=replace(cast(Any, self.own), **changes))
