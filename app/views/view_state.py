"""Everything a screen shows, as URL state: the server keeps none.

A view is (walkthrough, step, expanded modules, selected node, GRPO params).
`expanded` and `node` appear in the URL only when they differ from the step's
saved view, so a step's plain URL is its saved view and a copied URL reopens
exactly what was on screen.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..domain.process_spec import ProcessCatalog
from ..domain.snapshot import Snapshot
from ..engine.params import GRPOParams
from .urls import URLS, params_query

OVERVIEW = "overview"  # the value of ?view= that shows the whole model


class UnknownViewPart(LookupError):
    """A URL names a step, node or module the walkthrough does not have."""


@dataclass(frozen=True)
class ViewState:
    walkthrough_id: str
    step_id: str
    expanded: tuple[str, ...]
    node: str | None
    params: GRPOParams
    process: str | None = None  # a training path whose stage the graph shows
    stage: str | None = None  # None = the process's last stage
    overview: bool = False  # the whole model, collapsed, in a compact layout (docs/design.md §2)

    @classmethod
    def parse(cls, snapshot: Snapshot, walkthrough_id: str, step_id: str, *,
              expanded: str | None, node: str | None, params: GRPOParams,
              process: str | None = None, stage: str | None = None,
              processes: ProcessCatalog | None = None, view: str | None = None) -> ViewState:
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
        process, stage = process or None, stage or None
        if process is not None:
            if processes is None or process not in processes.ids:
                raise UnknownViewPart(f"There is no training path {process!r}.")
            proc = processes.get(process)
            if stage is not None and stage not in {s.id for s in proc.stages}:
                raise UnknownViewPart(f"Training path {process!r} has no stage {stage!r}.")
            if stage == proc.default_stage.id:
                stage = None  # the default: one URL per view
        elif stage is not None:
            raise UnknownViewPart(f"Stage {stage!r} needs a training path (process=...).")
        return cls(walkthrough_id, step_id, open_modules, selected, params, process, stage,
                   overview=view == OVERVIEW)

    @classmethod
    def for_step(cls, snapshot: Snapshot, walkthrough_id: str, step_id: str, params: GRPOParams) -> ViewState:
        return cls.parse(snapshot, walkthrough_id, step_id, expanded=None, node=None, params=params)

    def query(self, snapshot: Snapshot) -> dict[str, str]:
        step = snapshot.step(self.step_id)
        q: dict[str, str] = {}
        if set(self.expanded) != set(step.view.expanded_module_ids):
            q["expanded"] = ",".join(self.expanded)
        default_node = step.view.selected_node_ids[0] if step.view.selected_node_ids else None
        if self.node != default_node and self.node is not None:
            q["node"] = self.node
        if self.process:
            q["process"] = self.process
            if self.stage:
                q["stage"] = self.stage
        q.update(params_query(self.params))
        if self.overview:
            q["view"] = OVERVIEW
        return q

    def url(self, snapshot: Snapshot) -> str:
        return URLS.step(self.walkthrough_id, self.step_id, self.query(snapshot))

    def toggled(self, module_id: str) -> ViewState:
        if module_id in self.expanded:
            return replace(self, expanded=tuple(m for m in self.expanded if m != module_id))
        return replace(self, expanded=(*self.expanded, module_id))

    def selecting(self, node_id: str) -> ViewState:
        """Selecting a node leaves the overview: the node is inspected in the step's view."""
        return replace(self, node=node_id, overview=False)

    def toggling_overview(self) -> ViewState:
        return replace(self, overview=not self.overview)

    def at_step(self, snapshot: Snapshot, step_id: str) -> ViewState:
        """Another step opens at its own saved view; parameters and training path travel along."""
        return replace(ViewState.for_step(snapshot, self.walkthrough_id, step_id, self.params),
                       process=self.process, stage=self.stage)

    def with_process(self, process: str | None, stage: str | None = None) -> ViewState:
        return replace(self, process=process or None, stage=stage)
