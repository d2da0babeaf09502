"""What a walkthrough kind brings to the house (docs/design.md §5, "How to add a kind").

A kind is one package under app/kinds/ (its domain, engine, views, web and templates) and one
line in app/web/kinds.py. The house asks it two things: does your engine run this snapshot
(`matches`, asked once per file when it is loaded or uploaded; the answer is stored on the
catalog entry), and what does this step look like (`step_page`, called by the one step route on
the compute executor). Everything else a kind adds, it adds through `install`: routers,
exception handlers, start-up state.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from app.domain.catalog import Catalog, CatalogEntry, Reader
from app.domain.snapshot import Node, Snapshot
from app.engine.grpo.params import Conventions
from app.engine.jobs.tasks import JobTask
from app.views.meaning import NodeMeaning


@dataclass(frozen=True)
class StepRequest:
    """One step page asked of a kind: the request, the catalog entry its kind runs, and the device."""
    request: Request
    walkthrough_id: str
    step_id: str
    entry: CatalogEntry
    catalog: Catalog
    device: str

    @property
    def snapshot(self) -> Snapshot:
        assert self.entry.snapshot is not None
        return self.entry.snapshot


@dataclass(frozen=True)
class Kind:
    id: str  # stored on catalog entries ("toy", "tiny_lm"); never in a URL
    title: str  # what it is, for people ("ToyGRPO: one choice per completion")
    matches: Callable[[Snapshot], bool]  # the engine's rule: it runs exactly this export's nodes
    step_page: Callable[[StepRequest], Response]  # runs on the compute executor (a cache miss computes)
    install: Callable[[FastAPI], None] = lambda app: None  # routers, handlers, app.state
    templates: Path | None = None  # holds templates/<kind id>/…, names the kind's screen uses
    # The kind's words for nodes of graphs shaped like its model, even view-only ones (views/meaning.py)
    describe: Callable[[Snapshot, Node, Conventions | None, int | None], NodeMeaning | None] | None = None
    # The allowed range of one of its parameters, for a 422 that names no range itself
    allowed_range: Callable[[str], str | None] | None = None
    # Its runs that are jobs (app/engine/jobs): the runner processes run exactly these
    tasks: tuple[JobTask, ...] = ()
    # The job of one of its training paths: (request, entry, path id, the path API's query) ->
    # (task name, params). KeyError for a path it does not have; ValueError names a bad parameter.
    path_job: Callable[[Request, CatalogEntry, str, Mapping[str, Any]], tuple[str, dict[str, Any]]] | None = None
    # The jobs a step page will read (the toy's paths, when its URL names one): awaited on the event
    # loop before the page takes a compute slot (web/job_wait.py). [] for none, or for a query the
    # page itself will refuse.
    step_jobs: Callable[[Request, CatalogEntry], list[tuple[str, dict[str, Any]]]] | None = None
    # A file format of its own (the step record's): such files open as this kind whatever their graph
    reader: Reader | None = None
