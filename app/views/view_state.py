"""Everything a screen shows, as URL state: the server keeps none.

A view is (walkthrough, step, expanded modules, selected node, GRPO params).
`expanded` and `node` appear in the URL only when they differ from the step's
saved view, so a step's plain URL is its saved view and a copied URL reopens
exactly what was on screen.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from app.domain.snapshot import Snapshot
from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.params import GRPOParams
from app.views.urls import COMPARE_PREFIX, URLS, conventions_query, params_query

OVERVIEW = "overview"  # the value of ?view= that shows the whole model


class UnknownViewPart(LookupError):
    """A URL names a step, node or module the walkthrough does not have."""


# -- Compare mode: side B's conventions as `vs_<field>` (docs: README "Compare mode") --------

COMPARE_KEYS = tuple(COMPARE_PREFIX + name for name in CONVENTION_FIELDS)


@dataclass(frozen=True)
class CompareRequest:
    """Side B as a URL asks for it. Compare mode is on when any `vs_` key is present; B is
    `Conventions(preset=vs_preset or "deepseekmath", **other vs_ fields)`, evaluated on side
    A's samples, so only conventions may differ. `errors` maps a vs_ key to its refusal."""
    typed: dict[str, str] = field(default_factory=dict)
    conventions: Conventions | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def on(self) -> bool:
        return bool(self.typed)

    def validation_errors(self) -> list[dict]:
        """The refusals as pydantic-style errors for a 422 (loc ("query", "vs_beta"))."""
        return [{"type": "value_error", "loc": ("query", key), "msg": msg} for key, msg in self.errors.items()]


def _error_key(err: Mapping[str, Any]) -> str:
    if err.get("loc"):
        return COMPARE_PREFIX + str(err["loc"][0])
    # a rule across fields (kl_bias_correction needs kl_placement=loss): the first one it names
    msg = err.get("msg", "")
    named = sorted((msg.find(n), n) for n in CONVENTION_FIELDS if n in msg and n != "preset")
    return COMPARE_PREFIX + (named[0][1] if named else "preset")


def parse_compare(query: Mapping[str, object]) -> CompareRequest:
    """Every `vs_` key of a query: none (Compare mode off), valid conventions, or the errors
    by key (an empty value means "the preset's"; "none" turns an optional number off)."""
    typed = {k: ("" if v is None else str(v).strip()) for k, v in query.items() if k.startswith(COMPARE_PREFIX)}
    if not typed:
        return CompareRequest()
    errors = {k: ("not a convention: side B runs on side A's samples, so only these may differ: "
                  + ", ".join(COMPARE_KEYS)) for k in typed if k not in COMPARE_KEYS}
    values = {k.removeprefix(COMPARE_PREFIX): v for k, v in typed.items() if k in COMPARE_KEYS and v != ""}
    try:
        conventions = Conventions(**values)
    except ValidationError as exc:
        for err in exc.errors():
            errors.setdefault(_error_key(err), err["msg"].removeprefix("Value error, "))
        conventions = None
    return CompareRequest(typed, None if errors else conventions, errors)


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
    compare: Conventions | None = None  # Compare mode: side B's conventions on these samples
    # More query values a walkthrough's own engine reads (the tiny LM's parameters), kept verbatim
    # by every link the screen makes: (name, value) pairs in URL order.
    extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, snapshot: Snapshot, walkthrough_id: str, step_id: str, *,
              expanded: str | None, node: str | None, params: GRPOParams,
              process: str | None = None, stage: str | None = None,
              processes: ProcessCatalog | None = None, view: str | None = None,
              compare: Conventions | None = None, extra: tuple[tuple[str, str], ...] = ()) -> ViewState:
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
                   overview=view == OVERVIEW, compare=compare, extra=extra)

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
        q.update(self.extra)
        if self.compare is not None:
            q.update(conventions_query(self.compare))
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
                       process=self.process, stage=self.stage, compare=self.compare, extra=self.extra)

    def with_process(self, process: str | None, stage: str | None = None) -> ViewState:
        return replace(self, process=process or None, stage=stage)

    def comparing(self, conventions: Conventions | None, params: GRPOParams | None = None) -> ViewState:
        """Compare mode with side B = `conventions` (None leaves it), optionally with new A params."""
        return replace(self, compare=conventions, params=self.params if params is None else params)
