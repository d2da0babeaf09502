"""The context of one walkthrough screen, built from URL state (no web framework here)."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from .engine import GRPOParams, StepResult, TrainingDiverged, run_grpo_step
from .engine.processes import run_process
from .engine.stage_step import stage_step
from .engine.params import allowed_range, format_param
from .graph import GraphView, build_graph_view
from .inspector import InspectorView, build_inspector
from .payloads import is_runnable
from .process_panel import ProcessPanel, build_process_panel
from .process_spec import ProcessCatalog
from .snapshot import Snapshot
from .view_state import ViewState

FORM_FIELDS = ("seed", "group_size", "clip_epsilon", "beta", "advantage_epsilon", "learning_rate",
               "iteration", "inner_steps", "inner_step", "prompt", "rewards")


@dataclass
class ParamForm:
    """What the parameter form shows: raw values as typed, and errors by field."""
    values: dict[str, str]
    errors: dict[str, str]
    allowed: dict[str, str | None]

    @classmethod
    def from_params(cls, params: GRPOParams) -> ParamForm:
        values = {}
        for name in FORM_FIELDS:
            v = getattr(params, name)
            values[name] = ("" if v is None else ",".join(map(format_param, v)) if name == "rewards"
                            else format_param(v))
        return cls(values, {}, {n: allowed_range(n) for n in FORM_FIELDS})


@dataclass
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
    processes: ProcessCatalog | None = None

    @property
    def step(self):
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

    def toggle_url(self, module_id: str) -> str:
        return self.url(self.state.toggled(module_id))

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

    @property
    def panel(self) -> ProcessPanel | None:
        if self.processes is None or not self.runnable:
            return None
        return build_process_panel(self, self.processes)

    def path(self) -> str:
        return self.url().split("?", 1)[0]

    @property
    def expanded_differs(self) -> bool:
        return set(self.state.expanded) != set(self.step.view.expanded_module_ids)

    def defaults_url(self) -> str:
        """This step's saved view with default parameters."""
        return self.url(ViewState.for_step(self.snapshot, self.state.walkthrough_id, self.state.step_id, GRPOParams()))

    def api_url(self) -> str:
        q = {"step": self.state.step_id, **self.state.params.query()}
        if self.state.process:
            q["process"] = self.state.process
            if self.state.stage:
                q["stage"] = self.state.stage
        return f"/api/walkthroughs/{self.state.walkthrough_id}/tensors?{urlencode(q)}"


def build_screen(snapshot: Snapshot, state: ViewState, device: str, form: ParamForm | None = None,
                 processes: ProcessCatalog | None = None) -> Screen:
    runnable = is_runnable(snapshot)
    result, run_error = None, None
    if runnable and state.process:
        process = processes.get(state.process)
        run = run_process(processes, process.id, state.params.seed)
        result = stage_step(run, state.stage or process.stages[-1].id, state.params.prompt)
    elif runnable:
        try:
            result = run_grpo_step(state.params, device)
        except TrainingDiverged as exc:
            run_error = str(exc)
    step = snapshot.step(state.step_id)
    shapes = {nid: rec.shape for nid, rec in result.nodes.items() if rec.shape is not None} if result else None
    selected = [state.node] if state.node else []
    graph = build_graph_view(snapshot, state.expanded, selected, camera=step.view.camera,
                             viewport=(step.view.viewport.width, step.view.viewport.height),
                             positions=step.view.node_positions or None, shapes=shapes)
    inspector = build_inspector(snapshot, state.node, result, state.step_id) if state.node else None
    return Screen(snapshot, state, snapshot.step_index(state.step_id), graph, inspector, result,
                  runnable, run_error, form or ParamForm.from_params(state.params), processes)
