"""The training paths (R1-Zero, R1, distillation) as validated data.

Loaded from `walkthroughs/processes.toml`; refusals name the field, e.g.
`process[1].stage[2].start: unknown checkpoint 'nope' (known here: base, r1-cold)`.
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.domain.json_path import render_loc
from app.kinds.toy.domain.rewards import COMPONENTS

ROOT_CHECKPOINTS = ("base", "student-base")
StageKind = Literal["sft", "grpo", "rejection_sampling", "distill_sft"]
Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]  # ids that travel in URLs as they are


class ProcessSpecError(ValueError):
    pass


class Stage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Slug
    kind: StageKind
    title: str
    start: str
    reference: str
    output: str
    reward: tuple[str, ...] = ()
    data: str | None = None
    iterations: Annotated[int, Field(ge=1, le=500)] = 30
    samples_per_prompt: Annotated[int, Field(ge=1, le=256)] = 16
    paper: str
    paper_section: str
    toy: str

    @model_validator(mode="after")
    def _fields_for_kind(self):
        for name in self.reward:
            if name not in COMPONENTS:
                raise ValueError(f"reward: unknown component {name!r} (known: {', '.join(COMPONENTS)})")
        if self.kind in ("grpo", "rejection_sampling") and not self.reward:
            raise ValueError(f"reward: a {self.kind} stage needs a reward rule")
        if self.kind in ("sft", "distill_sft") and not self.data:
            raise ValueError(f"data: a {self.kind} stage needs its training data")
        return self

    @property
    def is_rl(self) -> bool:
        return self.kind == "grpo"


class Process(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Slug
    title: str
    summary: str
    paper_section: str
    paper_result: str
    stages: Annotated[tuple[Stage, ...], Field(alias="stage", min_length=1)]

    @property
    def default_stage(self) -> Stage:
        """The stage a view shows when none is named: the path's last, its end result."""
        return self.stages[-1]

    def stage(self, stage_id: str) -> Stage:
        for s in self.stages:
            if s.id == stage_id:
                return s
        raise KeyError(stage_id)


class ProcessCatalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    processes: Annotated[tuple[Process, ...], Field(alias="process", min_length=1)]

    @model_validator(mode="after")
    def _references(self):
        """Checkpoints and datasets must exist before a stage uses them (in file order)."""
        checkpoints: set[str] = set(ROOT_CHECKPOINTS)
        datasets: set[str] = set()
        seen: set[str] = set()
        for i, proc in enumerate(self.processes):
            if proc.id in seen:
                raise ValueError(f"process[{i}].id: duplicate process {proc.id!r}")
            seen.add(proc.id)
            stage_ids = set()
            for j, st in enumerate(proc.stages):
                where = f"process[{i}].stage[{j}]"
                if st.id in stage_ids:
                    raise ValueError(f"{where}.id: duplicate stage {st.id!r}")
                stage_ids.add(st.id)
                for field in ("start", "reference"):
                    name = getattr(st, field)
                    if name not in checkpoints:
                        raise ValueError(f"{where}.{field}: unknown checkpoint {name!r} "
                                         f"(known here: {', '.join(sorted(checkpoints))})")
                if st.data is not None and st.data != "cold-start" and st.data not in datasets:
                    raise ValueError(f"{where}.data: unknown dataset {st.data!r} (known here: cold-start"
                                     f"{', ' if datasets else ''}{', '.join(sorted(datasets))})")
                if st.output in checkpoints | datasets:
                    raise ValueError(f"{where}.output: {st.output!r} is already defined")
                (datasets if st.kind == "rejection_sampling" else checkpoints).add(st.output)
        return self

    def get(self, process_id: str) -> Process:
        for p in self.processes:
            if p.id == process_id:
                return p
        raise KeyError(process_id)

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.processes]


def parse_processes(text: str, source: str = "processes.toml") -> ProcessCatalog:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProcessSpecError(f"{source}: not valid TOML ({exc})") from None
    try:
        return ProcessCatalog.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = render_loc(err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise ProcessSpecError(f"{source}: {loc + ': ' if loc else ''}{msg}") from None


def load_processes(path: Path) -> ProcessCatalog:
    return parse_processes(path.read_text(encoding="utf-8"), path.name)
