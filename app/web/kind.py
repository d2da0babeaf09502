"""What a walkthrough kind brings to the house, and the registry of the kinds an app serves
(docs/design.md, "How to add a kind").

A kind is one package under app/kinds/<id>/ (its domain, engine, views, web, templates and static
files) and one line in app/house.py, the only module that names the kinds. `Kind` is its manifest:
everything the house asks of a kind is a field here, so the shared layers never name one. The house
asks two things of every kind: does your engine run this snapshot (`matches`, asked once per file
when it is loaded or uploaded; the answer is stored on the catalog entry), and what does this step
look like (`step_page`, called by the one step route on the compute executor). The rest is
optional: start-up state (`install`), its step's JSON (`step_api`) and the routes only it has (`routers`),
templates and static files, readers of its own file formats, job tasks, command-line subcommands, what the
start and upload pages say of it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from app.domain.catalog import Catalog, CatalogEntry, Featured, Reader
from app.domain.snapshot import Node, Snapshot
from app.domain.uploads import MAX_BYTES, MB, upload_limit
from app.engine.export_target import ExportTarget
from app.engine.grpo.params import Conventions
from app.engine.jobs.tasks import Job, JobTask
from app.views.meaning import NodeMeaning
from app.views.screen import PartOf
from app.web.settings import Settings


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
class Cli:
    """What a kind's command-line subcommand gets besides its arguments: the registry (to store a
    file as the server would classify it) and a way to start the server afterwards."""
    kinds: KindRegistry
    serve: Callable[[list[str]], int]


# `python -m app <name> ARGS…`: (ARGS, Cli) -> exit status
Command = Callable[[list[str], Cli], int]


# The order the server computes its kinds' default runs in at start-up: what a first visitor needs first
# (issue 47). One at a time, each behind any visitor's own run (app/engine/jobs/runner.py).
FIRST_PAGE = 0  # runs a featured walkthrough's first pages read, seconds each
FIRST_PATH = 1  # the first training path a paths box shows
REAL_STEP = 2  # one long step a page shows the progress of (a pretrained model's)
LONG_PATHS = 3  # the rest: long training paths


class WalkthroughFile(NamedTuple):
    """A walkthrough file a kind makes itself (Kind.walkthrough_files), and its words for the lists, if any."""
    path: Path
    featured: Featured | None = None


class DefaultRun(NamedTuple):
    """A run the server queues itself at start-up: a job and when it comes (FIRST_PAGE...)."""
    job: Job
    order: int = FIRST_PAGE


@dataclass(frozen=True)
class KindRoute:
    """A kind's handler for an address the house owns (Kind.step_api, Kind.paths_panel): an ordinary FastAPI
    endpoint (its parameters, dependencies and validation are the kind's) that the house's one route runs for
    walkthroughs of this kind (app/web/routes/kind_routes.py). `strict`: an unknown query parameter is a 422,
    the JSON API's rule; `responses` documents its answers as a route's would."""
    endpoint: Callable[..., Any]
    methods: tuple[str, ...] = ("GET",)
    responses: Mapping[int | str, dict[str, Any]] = field(default_factory=dict)
    strict: bool = True


class Moved(NamedTuple):
    """An address a kind served before the house owned it: answered 308 to `new` (the same path parameters,
    the query kept), for every method."""
    old: str
    new: str


@dataclass(frozen=True)
class Kind:
    id: str  # stored on catalog entries; never in a URL
    title: str  # what it is, for people
    # The engine's rule: it runs exactly this export's nodes. A sibling of kinds that runs no snapshot
    # (app/runs: whole training runs) matches none and has no step page.
    matches: Callable[[Snapshot], bool] = lambda snapshot: False
    step_page: Callable[[StepRequest], Response] | None = None  # runs on the compute executor (a cache miss computes)
    install: Callable[[FastAPI], None] = lambda app: None  # handlers, app.state (routes: the fields below)
    templates: Path | None = None  # holds templates/<kind id>/…, names the kind's screen uses
    # Served at /static/<kind id>/…; its stylesheets (names relative to it) load on every page, after
    # the shared ones (a page may be a fragment swapped into another kind's page, so they are global).
    static: Path | None = None
    stylesheets: tuple[str, ...] = ()
    # The kind's words for nodes of graphs shaped like its model, even view-only ones (views/meaning.py)
    describe: Callable[[Snapshot, Node, Conventions | None, int | None], NodeMeaning | None] | None = None
    # The allowed range of one of its parameters, for a 422 that names no range itself
    allowed_range: Callable[[str], str | None] | None = None
    # Its runs that are jobs (app/engine/jobs): the runner processes run exactly these
    tasks: tuple[JobTask, ...] = ()
    # The job of one of its training paths: (request, entry, path id, the path API's query) -> the Job (made
    # by its JobParams: one key function). KeyError for a path it does not have; ValueError names a bad parameter.
    path_job: Callable[[Request, CatalogEntry, str, Mapping[str, Any]], Job] | None = None
    # The jobs a step page will read (a training path its URL names): awaited on the event loop
    # before the page takes a compute slot (web/jobs/wait.py), and started by a POST to the page's
    # own address (its Run button). [] for none, or for a query the page itself will refuse.
    step_jobs: Callable[[Request, CatalogEntry], list[Job]] | None = None
    # Whether a GET of the page waits for those jobs (up to WAIT_S) before drawing it. A kind whose
    # runs take longer than a reader would wait (the real model's step) draws the page at once with
    # the run's progress instead, and reads the jobs itself.
    waits_for_jobs: bool = True
    # Its runs for the default parameters, which the server itself queues at start-up (DEFAULT_RUNS),
    # so a first visitor finds them computed: a GET never starts one (web/jobs/start.py). Computed in
    # their `order`, the kinds' together (FIRST_PAGE first), after any visitor's run.
    default_runs: Callable[[FastAPI], list[DefaultRun]] | None = None
    # Walkthrough files of its own besides the walkthroughs folder's (made from the server's settings: an
    # added model's), loaded into the catalog after the folder's, in every process that loads the catalog
    walkthrough_files: Callable[[Settings], list[WalkthroughFile]] | None = None
    # A file format of its own: such files open as this kind whatever their graph
    reader: Reader | None = None
    # Its own walkthrough files, listed first with what they teach (the first loaded one is `/`)
    featured: tuple[Featured, ...] = ()
    # A template (under its `templates`) the upload page includes: how to make a file it opens
    upload_help: str | None = None
    # `python -m app <name> …`
    commands: Mapping[str, Command] = field(default_factory=dict)
    # Its models for `python -m app.export --model NAME`
    export_targets: tuple[ExportTarget, ...] = ()
    # Where a walkthrough sits in something larger that this kind keeps (a recorded step in its run):
    # (request, walkthrough id) -> the links for its step panel, or None. Asked of every kind by the
    # page of any kind's step (`KindRegistry.part_of`), so a kind that links to another names none.
    part_of: Callable[[Request, str], PartOf | None] | None = None
    # Its handlers for the addresses the house owns (app/web/routes/kind_routes.py): the step's JSON at
    # /api/walkthroughs/{walkthrough_id}/step, and its training paths' box (an HTML fragment the page polls
    # and posts its Run to) at /walkthroughs/{walkthrough_id}/paths/{path}.
    step_api: tuple[KindRoute, ...] = ()
    paths_panel: tuple[KindRoute, ...] = ()
    # Routes only this kind has (its page has something no other has): named here, included by the house.
    routers: tuple[APIRouter, ...] = ()
    # Its old addresses, answered 308 to the house's
    moved: tuple[Moved, ...] = ()


@dataclass(frozen=True)
class KindRegistry:
    """The kinds one app serves, in order: the first kind whose engine matches a snapshot runs it
    (datasette's firstresult hooks); a snapshot none matches is view-only."""
    kinds: tuple[Kind, ...]

    def __post_init__(self) -> None:
        ids = [k.id for k in self.kinds]
        if len(set(ids)) != len(ids):
            raise ValueError(f"two kinds share an id: {ids}")
        _ = (self.commands, self.export_targets, self.tasks)  # each refuses a name two kinds share

    def classify(self, snapshot: Snapshot) -> str | None:
        """The id of the first kind whose engine runs `snapshot`, or None (view-only)."""
        return next((k.id for k in self.kinds if k.matches(snapshot)), None)

    @property
    def readers(self) -> tuple[Reader, ...]:
        """Every kind's own file formats, asked before a file is read as a snapshot."""
        return tuple(k.reader for k in self.kinds if k.reader is not None)

    @property
    def upload_limit(self) -> int:
        """The largest file any upload may be: a snapshot's limit or a larger reader's. The
        transport's cap (web/middleware/limits.py) is this one; each format then has its own."""
        return upload_limit(self.readers)

    @property
    def upload_formats(self) -> tuple[tuple[str, int], ...]:
        """Every file format an upload may be, (what it is, its limit in MB), the snapshot last."""
        return (*((r.title, r.max_bytes // MB) for r in self.readers), ("tensorviz snapshot", MAX_BYTES // MB))

    @property
    def upload_limits(self) -> str:
        """What each format may be, for a 413: "files up to 32 MB: a …; a tensorviz snapshot up to 2 MB"."""
        own = [f"a {r.title}" for r in sorted(self.readers, key=lambda r: -r.max_bytes) if r.max_bytes > MAX_BYTES]
        snapshot = f"a tensorviz snapshot up to {MAX_BYTES // MB} MB"
        return f"files up to {self.upload_limit // MB} MB: {', '.join(own)}; {snapshot}" if own else snapshot

    @property
    def featured(self) -> tuple[Featured, ...]:
        return tuple(sorted((f for k in self.kinds for f in k.featured), key=lambda f: f.rank))

    @property
    def commands(self) -> dict[str, Command]:
        return _unique([(name, command) for k in self.kinds for name, command in k.commands.items()], "command name")

    @property
    def export_targets(self) -> dict[str, ExportTarget]:
        return _unique([(t.name, t) for k in self.kinds for t in k.export_targets], "export target's name")

    @property
    def upload_help(self) -> tuple[str, ...]:
        return tuple(k.upload_help for k in self.kinds if k.upload_help is not None)

    @property
    def stylesheets(self) -> tuple[str, ...]:
        """Every kind's stylesheets as static names (`<kind id>/<name>`)."""
        return tuple(f"{k.id}/{name}" for k in self.kinds for name in k.stylesheets)

    def walkthrough_files(self, settings: Settings) -> list[WalkthroughFile]:
        """Every kind's own walkthrough files for these settings (Kind.walkthrough_files)."""
        return [f for k in self.kinds if k.walkthrough_files is not None for f in k.walkthrough_files(settings)]

    def part_of(self, request: Request, walkthrough_id: str) -> PartOf | None:
        """The first kind's answer to where this walkthrough sits (Kind.part_of), or None."""
        return next((p for k in self.kinds if k.part_of is not None
                     if (p := k.part_of(request, walkthrough_id)) is not None), None)

    def get(self, kind_id: str | None) -> Kind | None:
        return next((k for k in self.kinds if k.id == kind_id), None)

    @property
    def tasks(self) -> dict[str, JobTask]:
        """Every kind's job tasks by name (names are unique across kinds)."""
        return _unique([(t.name, t) for k in self.kinds for t in k.tasks], "job task name")

    def allowed_range(self, name: str) -> str | None:
        for kind in self.kinds:
            if kind.allowed_range is not None and (found := kind.allowed_range(name)) is not None:
                return found
        return None


def _unique(named: list[tuple[str, Any]], what: str) -> dict[str, Any]:
    """The items by name; ValueError when two kinds give one name."""
    found = dict(named)
    if len(found) != len(named):
        names = [n for n, _ in named]
        raise ValueError(f"two kinds share a {what}: {sorted({n for n in names if names.count(n) > 1})}")
    return found
