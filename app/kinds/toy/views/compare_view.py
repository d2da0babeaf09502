"""Compare mode's view model: two runs of the shown step on the same samples, side by side.

Side A is the page's step; side B re-scores A's policy, group and rewards with other GRPO
conventions (engine/compare.py). Everything a template shows is built here: the words that
say what A and B are, the differing conventions, the side-by-side group table, each node's
gradient change and the marker drawn for it on the graph, the form and the one-click cases.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.engine.grpo.presets import PRESET_NAMES, PRESET_TITLES
from app.engine.runtime.records import NodeRecord
from app.kinds.toy.engine.compare import Comparison, GradChange, flatten
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.step_inputs import ToyInputs
from app.kinds.toy.views import urls
from app.kinds.toy.views.compare_form import ENTER_PRESET, CaseLink, CompareForm, case_links, compare_form
from app.kinds.toy.views.compare_marks import GradMark, change_detail, change_tag, grad_marks
from app.kinds.toy.views.form import FIELDS
from app.kinds.toy.views.inspector import sample_choice_labels
from app.kinds.toy.views.screen import ToyScreen
from app.kinds.toy.views.url_state import CompareRequest
from app.views.meaning import node_meaning
from app.views.urls import conventions_query, params_query, query_value

MAX_ROWS = 64
LABELS = {f.name: f.label for f in FIELDS}


@dataclass(frozen=True)
class Side:
    letter: str
    preset: str
    preset_title: str
    words: str                # what this side is, in a sentence
    overrides: tuple[str, ...]  # "β = 0", beyond the preset
    loss: float
    objective: float
    clip_active: int
    kl_mean: float
    grad_norm: float          # ‖∂loss/∂θ‖ over the policy's parameters


@dataclass(frozen=True)
class ConventionRow:
    name: str
    label: str
    a: str
    b: str


@dataclass(frozen=True)
class PairCell:
    a: float | int | bool | None
    b: float | int | bool | None

    @property
    def differs(self) -> bool:
        return self.a != self.b


@dataclass(frozen=True)
class SampleRow:
    index: int
    choice: int
    choice_label: str
    reward: float
    cells: tuple[PairCell, ...]  # in COLUMNS order
    sign_flip: bool


COLUMNS = (("advantage", "advantage Â"), ("ratio", "ratio ρ"), ("kl_used", "KL term"),
           ("objective", "objective term"), ("ratio_grad", "∂loss/∂ρ"))


@dataclass(frozen=True)
class GradRow:
    id: str
    name: str
    change: GradChange
    tag: str
    is_parameter: bool


@dataclass(frozen=True)
class NodeCompare:
    """The selected node in both runs, for the inspector."""
    node_id: str
    change: GradChange | None
    tag: str
    detail: str
    b: NodeRecord | None


@dataclass(frozen=True)
class CompareView:
    on: bool
    form: CompareForm
    cases: tuple[CaseLink, ...]
    enter_url: str
    leave_url: str
    note: str | None = None           # why nothing is compared (a training path is shown)
    note_url: str | None = None
    error: str | None = None          # B's step failed (diverged)
    a: Side | None = None
    b: Side | None = None
    conventions: tuple[ConventionRow, ...] = ()
    columns: tuple[tuple[str, str], ...] = COLUMNS
    samples: tuple[SampleRow, ...] = ()
    sample_count: int = 0
    grads: tuple[GradRow, ...] = ()
    marks: dict[str, GradMark] | None = None
    node: NodeCompare | None = None
    swap_url: str | None = None
    api_url: str | None = None
    b_preset_links: tuple[tuple[str, str, bool], ...] = ()
    a_beta: float | None = None
    b_beta: float | None = None

    @property
    def summary(self) -> tuple[tuple[str, PairCell], ...]:
        a, b = self.a, self.b
        if a is None or b is None:
            return ()
        return (("loss = −J", PairCell(a.loss, b.loss)), ("objective J", PairCell(a.objective, b.objective)),
                ("clip-active rows", PairCell(a.clip_active, b.clip_active)),
                ("mean KL term", PairCell(a.kl_mean, b.kl_mean)),
                ("‖∂loss/∂θ‖, policy parameters", PairCell(a.grad_norm, b.grad_norm)))

    @property
    def banner(self) -> str:
        """One line above the graph: what is compared, where the numbers are."""
        case = self.active_case
        head = f"{case.case.title}. " if case else ""
        if self.form.errors:
            return "Compare mode: side B's parameters were refused; see the compare form."
        if self.a is None or self.b is None:
            return f"{head}Compare mode: nothing is compared here."
        return (f"{head}Compare mode: A = {self.a.preset}{' (adjusted)' if self.a.overrides else ''}, "
                f"B = {self.b.preset}{' (adjusted)' if self.b.overrides else ''}, on the same samples. "
                "The tag above a node is its gradient's change from A to B.")

    @property
    def beta_notes(self) -> tuple[str, ...]:
        """A side with β = 0 still computes its KL term, but the loss does not use it."""
        sides = [s for s, c in ((self.a, self.a_beta), (self.b, self.b_beta)) if s is not None and c == 0]
        return tuple(f"{s.letter} has β = 0: its KL term is computed but does not enter the loss." for s in sides)

    @property
    def active_case(self) -> CaseLink | None:
        return next((c for c in self.cases if c.current), None)

    @property
    def status(self) -> int:
        return 422 if self.form.errors else 200


def _fmt(name: str, value) -> str:
    return query_value(name, value)


def _overrides(c: Conventions) -> tuple[str, ...]:
    return tuple(f"{LABELS.get(n, n)} = {_fmt(n, v)}" for n, v in c.url_overrides().items() if n != "preset")


def _side(letter: str, result: StepResult, c: Conventions, words: str) -> Side:
    grads = [v for g in result.parameter_grads.values() for v in flatten(g.get("grad"))]
    kls = [s["kl_used"] for s in result.samples]
    return Side(letter, c.preset, PRESET_TITLES[c.preset], words, _overrides(c), result.loss, result.objective,
                sum(1 for s in result.samples if s["clip_active"]), math.fsum(kls) / len(kls) if kls else 0.0,
                math.sqrt(math.fsum(v * v for v in grads)))


def _words(params: GRPOParams, conventions_b: Conventions) -> tuple[str, str]:
    a = params.shown_conventions()  # with the figure's step_clip_epsilon / step_beta, as side A records it
    extra = [f"rewards overridden to {query_value('rewards', params.rewards)}"] if params.rewards else []
    a_words = (f"A is the step as this page sets it: {PRESET_TITLES[a.preset]} conventions "
               f"(preset {a.preset}){_with(_overrides(a), extra)}.")
    changed = [f"{r.label} {r.a} → {r.b}" for r in _convention_rows(a, conventions_b) if r.name != "preset"]
    against = f"; against A it changes {', '.join(changed)}" if changed else "; its conventions are A's"
    b_words = (f"B re-scores the very same policy, completions and rewards with "
               f"{PRESET_TITLES[conventions_b.preset]} conventions (preset {conventions_b.preset}){against}. "
               "Only the loss's conventions differ, never the samples.")
    return a_words, b_words


def _with(overrides, extra) -> str:
    parts = [*overrides, *extra]
    return f", with {', '.join(parts)}" if parts else ""


def _convention_rows(a: Conventions, b: Conventions) -> tuple[ConventionRow, ...]:
    return tuple(ConventionRow(n, LABELS.get(n, n), _fmt(n, getattr(a, n)), _fmt(n, getattr(b, n)))
                 for n in CONVENTION_FIELDS if getattr(a, n) != getattr(b, n))


def _samples(c: Comparison) -> tuple[SampleRow, ...]:
    labels = sample_choice_labels(c.a)
    rows = []
    for i, (sa, sb) in enumerate(zip(c.a.samples[:MAX_ROWS], c.b.samples[:MAX_ROWS], strict=True)):
        cells = tuple(PairCell(sa[k], sb[k]) for k, _ in COLUMNS) + (PairCell(sa["clip_active"], sb["clip_active"]),)
        flip = (sa["advantage"] > 0 > sb["advantage"]) or (sa["advantage"] < 0 < sb["advantage"])
        rows.append(SampleRow(i, sa["action"], labels[i] if i < len(labels) else str(sa["action"]),
                              sa["reward"], cells, flip))
    return tuple(rows)


def _grad_rows(screen: ToyScreen, c: Comparison) -> tuple[GradRow, ...]:
    rows = []
    for node_id, change in c.grad_change.items():
        if change is None:
            continue
        is_param = node_id not in c.a.nodes
        name = node_id if is_param or node_id not in screen.snapshot.node_map else \
            node_meaning(screen.snapshot, node_id).display_name
        rows.append(GradRow(node_id, name, change, change_tag(change), is_param))
    order = {n.node_id: i for i, n in enumerate(screen.snapshot.nodes)}
    rows.sort(key=lambda r: (r.is_parameter, order.get(r.id, 0)))
    return tuple(rows)


def _node(screen: ToyScreen, c: Comparison) -> NodeCompare | None:
    node_id = screen.state.node
    if node_id is None or node_id not in c.a.nodes:
        return None
    change = c.grad_change.get(node_id)
    if change is None:
        return NodeCompare(node_id, None, "", "Neither A nor B sends a gradient through this node.", c.b.nodes[node_id])
    return NodeCompare(node_id, change, change_tag(change), change_detail(change), c.b.nodes[node_id])


def build_compare_view(screen: ToyScreen, request: CompareRequest, inputs: ToyInputs) -> CompareView:
    """Compare mode from the page's finished results: side B's step is `inputs.comparison`."""
    state = screen.state
    base = CompareView(
        on=request.on, form=compare_form(screen, request, state.own.compare), cases=case_links(screen),
        enter_url=screen.url(state.with_own(compare=Conventions(preset=ENTER_PRESET), process=None, stage=None)),
        leave_url=screen.url(state.with_own(compare=None)))
    b = state.own.compare
    if not request.on or b is None:
        return base
    if state.own.process is not None:
        return replace(base, note="Compare mode compares the walkthrough's own GRPO step; a training "
                       "path's stage runs with its own settings.",
                       note_url=screen.url(state.with_own(process=None, stage=None)))
    if inputs.compare_error is not None:
        return replace(base, error=inputs.compare_error)
    comparison = inputs.comparison
    assert comparison is not None, "the page obtains side B whenever Compare mode is on"
    a_words, b_words = _words(state.own.params, b)
    a = state.own.params.shown_conventions()  # side A as the step page shows it (compare.compare_step)
    swapped = GRPOParams(**{**state.own.params.model_dump(), **b.model_dump(), "step_clip_epsilon": None,
                            "step_beta": None})
    return replace(
        base, a=_side("A", comparison.a, a, a_words),
        b=_side("B", comparison.b, b, b_words), a_beta=a.beta, b_beta=b.beta,
        conventions=_convention_rows(a, b),
        samples=_samples(comparison), sample_count=len(comparison.a.samples),
        grads=_grad_rows(screen, comparison), marks=grad_marks(screen.graph, comparison.grad_change),
        node=_node(screen, comparison),
        swap_url=screen.url(state.with_own(compare=a, params=swapped)),
        api_url=urls.compare(state.walkthrough_id, {"step": state.step_id, **params_query(state.own.params),
                                                    **conventions_query(b)}),
        b_preset_links=tuple((p, screen.url(state.with_own(compare=Conventions(preset=p)))
                              , p == b.preset and not _overrides(b)) for p in PRESET_NAMES))
