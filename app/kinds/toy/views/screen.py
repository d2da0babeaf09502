"""The toy's screen: the shared graph screen (app/views/screen.py) plus the recorded GRPO step
(or a training path's stage), its inspector with charts, the group table, the parameter form
and the training-path panel."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from app.domain.snapshot import Snapshot
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.step_inputs import ToyInputs
from app.kinds.toy.views import urls
from app.kinds.toy.views.figure_control import FigureControl, build_figure_control
from app.kinds.toy.views.form import STAGE_PARAMS_NOTE, ParamForm
from app.kinds.toy.views.inspector import build_toy_inspector
from app.kinds.toy.views.meaning import choice_label
from app.kinds.toy.views.path_view import PathView, build_path_view
from app.kinds.toy.views.process_panel import ProcessPanel, build_process_panel
from app.kinds.toy.views.sample_table import SampleTable, build_sample_table
from app.kinds.toy.views.story import STORIES, StoryFigure, build_story_figure
from app.kinds.toy.views.url_state import ToyState, view_for_step
from app.views.numbers import readout
from app.views.screen import GraphAnnotation, Screen, build_graph
from app.views.urls import conventions_query, params_query
from app.views.view_state import ViewState


@dataclass(frozen=True)
class ToyScreen(Screen):
    result: StepResult | None = None
    run_error: str | None = None
    form: ParamForm | None = None
    panel: ProcessPanel | None = None
    stage_params_note: str = STAGE_PARAMS_NOTE

    leads_on: ClassVar = ("process-panel", "training paths (R1-Zero, R1, distillation)")
    parts: ClassVar = {"focus": "toy/story_figure.html", "form": "toy/param_form.html", "panels": "toy/panels.html",
                       "node_extra": "toy/compare_node.html", "record_head": "toy/reward_inputs.html",
                       "inspector_tail": "toy/inspector_group.html",
                       "compare": "toy/compare_panel.html"}
    runnable: ClassVar[bool] = True
    stories: ClassVar = STORIES

    @property
    def form_refused(self) -> bool:
        return bool(self.form and self.form.errors)

    @property
    def story_figure(self) -> StoryFigure | None:
        """The step's focus figure: the group, revealed as far as the story has come."""
        return build_story_figure(self.result, self.state.step_id)

    @property
    def path_view(self) -> PathView | None:
        """With a training path chosen: what the step's figure shows instead of the step's own group, whether
        the step's point still shows in it, and the way back (toy/story_figure.html draws it first)."""
        panel = self.panel
        if not self.own.process or panel is None or panel.process is None or panel.stage is None:
            return None
        back = self.url(self.state.with_own(process=None, stage=None))
        return build_path_view(self.result, self.state.step_id, panel.process, panel.stage.stage,
                               panel.stage.iterations, back)

    @property
    def figure_control(self) -> FigureControl | None:
        """The step's own parameter, changed at its figure: none on a training path's stage (its own
        settings), in Compare mode (side B's panel would not follow) or beside a refused form."""
        result = self.result
        if result is None or result.kind != "grpo" or self.own.process or self.own.compare is not None \
                or self.form_refused:
            return None
        labels = [choice_label(result.prompt, s["action"]) if isinstance(s.get("action"), int) else "?"
                  for s in result.samples]
        return build_figure_control(self.state.step_id, self.own.params, self.state.query(self.snapshot),
                                    result.samples, labels)

    @property
    def own(self) -> ToyState:
        state: ToyState = self.state.own
        return state

    @property
    def sample_table(self) -> SampleTable | None:
        """The group table of a GRPO step, its columns chosen by the conventions in force."""
        return build_sample_table(self.result)

    @property
    def inactive(self) -> set[str]:
        """Nodes that take no part in the chosen process stage: drawn dimmed."""
        if self.result is None:
            return set()
        return {n for n, rec in self.result.nodes.items() if rec.inactive_reason is not None}

    @property
    def compare_query(self) -> dict[str, str]:
        """Side B's `vs_` values, so Recompute keeps Compare mode (hidden inputs of the form)."""
        return {} if self.own.compare is None else conventions_query(self.own.compare)

    def defaults_url(self) -> str:
        """This step's saved view with default parameters."""
        return self.url(view_for_step(self.snapshot, self.state.walkthrough_id, self.state.step_id, GRPOParams()))

    def api_url(self) -> str:
        q = {"step": self.state.step_id, **params_query(self.own.params)}
        if self.own.process:
            q["process"] = self.own.process
            if self.own.stage:
                q["stage"] = self.own.stage
        return urls.tensors(self.state.walkthrough_id, q)


def _annotations(result: StepResult | None) -> dict[str, GraphAnnotation]:
    """The rewards enter GRPO outside the traced model: name them beside the node that takes
    them (advantages), so the graph shows where the advantages come from. The label names them
    without their values: the step's figure shows those and can change them in place, where the
    graph stays as it is (and a note of fixed text keeps the graph's layout, and so its camera)."""
    if result is None or result.kind != "grpo" or not result.samples or "advantages" not in result.nodes:
        return {}
    rewards = [s["reward"] for s in result.samples]
    shown = ", ".join(readout(r) for r in rewards[:8]) + (", …" if len(rewards) > 8 else "")
    return {"advantages": GraphAnnotation(
        label=f"rewards r of the {len(rewards)} completions",
        detail=(f"The rewards of the {len(rewards)} completions, r = {shown} "
                f"({result.history.get('reward_rule', 'the reward rule')}), feed the advantages."))}


def build_screen(snapshot: Snapshot, state: ViewState[ToyState], inputs: ToyInputs, form: ParamForm | None = None,
                 processes: ProcessCatalog | None = None) -> ToyScreen:
    """The screen from the page's finished results (`inputs`, engine/step_inputs.py)."""
    own = state.own
    result, run_error = inputs.result, inputs.run_error
    shapes = {nid: rec.shape for nid, rec in result.nodes.items() if rec.shape is not None} if result else None
    inspector = build_toy_inspector(snapshot, state.node, result, state.step_id) if state.node else None
    panel = build_process_panel(snapshot, state, processes, inputs.runs) if processes is not None else None
    annotations = _annotations(result)
    graph = build_graph(snapshot, state, shapes, annotations)
    return ToyScreen(snapshot, state, snapshot.step_index(state.step_id), graph, inspector, annotations,
                     result=result, run_error=run_error,
                     form=form or ParamForm.from_params(own.params), panel=panel)
