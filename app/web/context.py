"""One app's own state (`AppContext`): made by create_app (app/web/factory.py build_app, and each
compute worker's worker_app), kept as `app.state.context`, and shared with no other app of the
process. Two apps side by side (a test builds two with different kinds) each have their own job
client, compute limiter, run-start buckets, words for nodes, templates and static versions.

Routes reach it with `ContextDep` (app/web/deps.py) or `request.app.state.context`, and hand what
the code they call needs to it as arguments. Engine and view code never import this module: a
compute job runs inside `bound()`, which binds this app's limiter and words for nodes for the call
(context variables of app/engine/runtime/compute.py and app/views/meaning.py), so a cached
computation's miss takes this app's slot and a node reads in this app's kinds' words.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import Request
from fastapi.templating import Jinja2Templates

from app.engine.jobs.client import JobClient
from app.engine.runtime.compute import ComputeLimiter, limited_by
from app.views.meaning import Describer, described_by
from app.web.jobs.start import StartLimiter
from app.web.kind import KindRegistry
from app.web.rendering import StaticVersions, make_templates
from app.web.settings import Settings


@dataclass(frozen=True, eq=False)
class AppContext:
    jobs: JobClient  # this app's job client: its store, its kinds' tasks, its runner threads
    limiter: ComputeLimiter  # its compute slots (configured by its ComputeExecutor)
    starts: StartLimiter  # its per-client buckets of run starts (app/web/jobs/start.py)
    describers: tuple[Describer, ...]  # its kinds' words for nodes, in registry order
    templates: Jinja2Templates  # the shared templates, then each of its kinds'
    static: StaticVersions  # the shared static files' versions and its kinds'

    @contextlib.contextmanager
    def bound(self) -> Iterator[AppContext]:
        """This app's limiter and words for nodes, for the code run inside (a compute job, a request)."""
        with limited_by(self.limiter), described_by(self.describers):
            yield self


def make_context(settings: Settings, kinds: KindRegistry, jobs: JobClient) -> AppContext:
    static = StaticVersions()
    for kind in kinds.kinds:
        if kind.static is not None:
            static.add_dir(kind.id, kind.static)
    templates = make_templates([k.templates for k in kinds.kinds if k.templates is not None], static)
    return AppContext(jobs=jobs, limiter=ComputeLimiter(settings.compute_slots, settings.compute_queue),
                      starts=StartLimiter(settings.job_starts_burst, settings.job_starts_per_min),
                      describers=tuple(k.describe for k in kinds.kinds if k.describe is not None),
                      templates=templates, static=static)


def context_of(request: Request) -> AppContext:
    return request.app.state.context


class BindContext:
    """ASGI middleware: every request runs with its app's context bound (AppContext.bound), so code
    that runs in the request's own thread reads this app's words for nodes and takes its slots."""

    def __init__(self, app, context: AppContext) -> None:
        self.app, self.context = app, context

    async def __call__(self, scope, receive, send) -> None:
        with self.context.bound():
            await self.app(scope, receive, send)
