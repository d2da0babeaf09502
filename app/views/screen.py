"""The context of one walkthrough screen, built from URL state (no web framework here).

`build_screen` does all the work (runs, graph, inspector, panel); templates only
read the finished Screen.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.domain.snapshot import Snapshot, Step
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.grpo_step import TrainingDiverged
from app.kinds.toy.engine.node_map import is_runnable
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.select import step_for_view
from app.kinds.toy.views.form import STAGE_PARAMS_NOTE, ParamForm
from app.kinds.toy.views.inspector import InspectorView, build_inspector
from app.kinds.toy.views.process_panel import ProcessPanel, build_process_panel
from app.kinds.toy.views.sample_table import SampleTable, build_sample_table
from app.views.graph import GraphView, build_graph_view
from app.views.numbers import readout
from app.views.overview_layout import overview_positions
from app.views.urls import URLS, conventions_query, params_query
from app.views.view_state import ViewState


@dataclass(frozen=True)
class Screen:
    snapshot: Snapshot
    state: ViewState
    step_index: int
    graph: GraphView
    inspector: InspectorView | None
    result: StepResult | None
    runnable: bool
    run_error: str | None
    form: ParamForm
    panel: ProcessPanel | None
    annotations: dict[str, GraphAnnotation]
    stage_params_note: str = STAGE_PARAMS_NOTE
    token: Any = None  # the tiny-LM walkthrough's own part (views/token_screen.py), else None

    @property
    def framed_ids(self) -> list[str]:
        """What the fitted camera keeps whole in the frame (docs/design.md §2): the step's saved
        selection and expanded modules, as drawn. Only the step's, so a copied URL gets the
        same camera; a node selected since is panned into view on load instead."""
        view = self.step.view
        drawn = set(self.graph.node_ids)
        return [n for n in dict.fromkeys([*view.selected_node_ids, *view.expanded_module_ids]) if n in drawn]

    @property
    def sample_table(self) -> SampleTable | None:
        """The group table of a GRPO step, its columns chosen by the conventions in force."""
        return build_sample_table(self.result)

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
        """Nodes that take no part in the chosen process stage: drawn dimmed."""
        if self.result is None:
            return set()
        return {n for n, rec in self.result.nodes.items() if rec.inactive_reason is not None}

    def path(self) -> str:
        return URLS.step(self.state.walkthrough_id, self.state.step_id)

    @property
    def compare_query(self) -> dict[str, str]:
        """Side B's `vs_` values, so Recompute keeps Compare mode (hidden inputs of the form)."""
        return {} if self.state.compare is None else conventions_query(self.state.compare)

    @property
    def expanded_differs(self) -> bool:
        return set(self.state.expanded) != set(self.step.view.expanded_module_ids)

    def defaults_url(self) -> str:
        """This step's saved view with default parameters."""
        return self.url(ViewState.for_step(self.snapshot, self.state.walkthrough_id, self.state.step_id, GRPOParams()))

    def api_url(self) -> str:
        q = {"step": self.state.step_id, **params_query(self.state.params)}
        if self.state.process:
            q["process"] = self.state.process
            if self.state.stage:
                q["stage"] = self.state.stage
        return URLS.tensors(self.state.walkthrough_id, q)


@dataclass(frozen=True)
class GraphAnnotation:
    """A note drawn beside a node that is not itself a node of the snapshot."""
    label: str    # short, on the graph
    detail: str   # the full sentence, for the title and screen readers


def _annotations(result: StepResult | None) -> dict[str, GraphAnnotation]:
    """The rewards enter GRPO outside the traced model: name them beside the node that takes
    them (advantages), so the graph shows where the advantages come from."""
    if result is None or result.kind != "grpo" or not result.samples or "advantages" not in result.nodes:
        return {}
    rewards = [s["reward"] for s in result.samples]
    shown = ", ".join(readout(r) for r in rewards[:8]) + (", …" if len(rewards) > 8 else "")
    return {"advantages": GraphAnnotation(
        label=f"rewards r = {shown}",
        detail=(f"The rewards of the {len(rewards)} completions "
                f"({result.history.get('reward_rule', 'the reward rule')}) feed the advantages."))}


def build_screen(snapshot: Snapshot, state: ViewState, device: str, form: ParamForm | None = None,
                 processes: ProcessCatalog | None = None) -> Screen:
    runnable = is_runnable(snapshot)
    result, run_error = None, None
    if runnable:
        try:
            result = step_for_view(state.params, device, processes, state.process, state.stage)
        except TrainingDiverged as exc:
            run_error = str(exc)
    step = snapshot.step(state.step_id)
    shapes = {nid: rec.shape for nid, rec in result.nodes.items() if rec.shape is not None} if result else None
    selected = [state.node] if state.node else []
    viewport = (step.view.viewport.width, step.view.viewport.height)
    if state.overview:  # every module closed, compact layers, camera fitted to the whole
        graph = replace(build_graph_view(snapshot, (), selected, viewport=viewport,
                                         positions=overview_positions(snapshot), shapes=shapes,
                                         downward_edges=True), fit_all=True)
    else:
        graph = build_graph_view(snapshot, state.expanded, selected, camera=step.view.camera, viewport=viewport,
                                 positions=step.view.node_positions or None, shapes=shapes)
    inspector = build_inspector(snapshot, state.node, result, state.step_id) if state.node else None
    panel = build_process_panel(snapshot, state, processes) if processes is not None and runnable else None
    return Screen(snapshot, state, snapshot.step_index(state.step_id), graph, inspector, result,
                  runnable, run_error, form or ParamForm.from_params(state.params), panel,
                  _annotations(result))
