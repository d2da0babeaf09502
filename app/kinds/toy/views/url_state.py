"""The toy's part of the URL state: GRPO parameters, the training path and stage shown, and
Compare mode's side B (`vs_<convention>`). Written into the URL in the order links have always
had: process, stage, parameters, then side B.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from app.domain.snapshot import Snapshot
from app.engine.grpo.params import CONVENTION_FIELDS, Conventions
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.params import GRPOParams
from app.views.urls import COMPARE_PREFIX, conventions_query, params_query
from app.views.view_state import UnknownViewPart, ViewState


@dataclass(frozen=True)
class ToyState:
    params: GRPOParams = field(default_factory=GRPOParams)
    process: str | None = None  # a training path whose stage the graph shows
    stage: str | None = None  # None = the process's last stage
    compare: Conventions | None = None  # Compare mode: side B's conventions on these samples

    def query(self) -> dict[str, str]:
        q: dict[str, str] = {}
        if self.process:
            q["process"] = self.process
            if self.stage:
                q["stage"] = self.stage
        q.update(params_query(self.params))
        if self.compare is not None:
            q.update(conventions_query(self.compare))
        return q


def parse_view(snapshot: Snapshot, walkthrough_id: str, step_id: str, *,
               expanded: str | None, node: str | None, params: GRPOParams,
               process: str | None = None, stage: str | None = None,
               processes: ProcessCatalog | None = None, view: str | None = None,
               compare: Conventions | None = None) -> ViewState[ToyState]:
    """The shared view state with the toy's part, the training path and stage checked."""
    state = ViewState.parse(snapshot, walkthrough_id, step_id, expanded=expanded, node=node, view=view,
                            own=ToyState(params, None, None, compare))
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
    return state.with_own(process=process, stage=stage)


def view_for_step(snapshot: Snapshot, walkthrough_id: str, step_id: str, params: GRPOParams) -> ViewState[ToyState]:
    return parse_view(snapshot, walkthrough_id, step_id, expanded=None, node=None, params=params)


# -- Compare mode: side B's conventions as `vs_<field>` (docs/explanation/compare-mode.md) --------

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


