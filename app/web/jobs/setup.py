"""The jobs of one process: the store, the kinds' tasks and where runs are computed.

`job_client` makes the client of every app that reads jobs (its AppContext's: the web app and each
compute worker's, app/web/factory.py); `install_jobs` adds to the web app the paths API, the
answers for a failed or unfinished run, and, with JOB_RUNNER=process, the runner child process.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.engine.jobs.client import JobClient, JobFailed, NotStarted
from app.engine.jobs.tasks import JobTask
from app.stores.jobs import QueueFull, open_job_backend
from app.stores.uploads import StoreUnavailable
from app.web.jobs import paths_api
from app.web.jobs.runner_process import RunnerProcess
from app.web.jobs.start import TooManyStarts, queue_default_runs
from app.web.kind import DefaultRun
from app.web.lifespan import with_server
from app.web.middleware.http_cache import CHANGES_NOW
from app.web.rendering import VARY, render_error, templates_of, wants_fragment
from app.web.settings import Settings

# Seconds a client refused for a full queue is told to wait: about what the runners need for a few
# short runs; a long queue drains no faster for being asked sooner.
QUEUE_FULL_RETRY_S = 10

log = logging.getLogger("app.jobs")


def job_client(settings: Settings, tasks: Mapping[str, JobTask]) -> JobClient:
    """An app's client. With JOB_RUNNER=process (a served app) no process but the runner child
    computes; "thread" (the test suite's in-process apps) starts the client's runner threads on first use."""
    store = open_job_backend(settings.resolved_data_dir, settings.database_url)
    jobs = JobClient()
    jobs.configure(store, tasks, settings.job_runner, settings.job_lease_s, want_s=settings.job_want_s)
    return jobs


def install_jobs(app: FastAPI, settings: Settings) -> None:
    paths_api.install(app)

    @app.exception_handler(NotStarted)
    async def _not_started(request: Request, exc: NotStarted):
        # A read of runs nobody asked for: nothing was queued. The page says what it would compute and
        # offers Run (a POST to the same address); the API names the request that starts them.
        if request.url.path.startswith("/api/"):
            start = exc.start or f"POST {request.url.path}{'?' + request.url.query if request.url.query else ''}"
            response = JSONResponse({"error": f"{exc}; a GET never starts a run: {start} starts it",
                                     "start": start, "runs": exc.titles}, status_code=404)
        else:
            action = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            page = "partials/not_started.html" if wants_fragment(request) else "pages/not_started.html"
            response = templates_of(request).TemplateResponse(request, page, {"titles": exc.titles, "action": action})
            response.headers["Vary"] = VARY
        response.headers["Cache-Control"] = CHANGES_NOW
        return response

    @app.exception_handler(TooManyStarts)
    async def _too_many(request: Request, exc: TooManyStarts):
        return _refused(request, 429, "Too many runs started", str(exc), exc.retry_after_s)

    @app.exception_handler(QueueFull)
    async def _queue_full(request: Request, exc: QueueFull):
        return _refused(request, 503, "The queue of runs is full", f"{exc}; nothing was queued. Try again shortly.",
                        QUEUE_FULL_RETRY_S)

    @app.exception_handler(JobFailed)
    async def _failed(request: Request, exc: JobFailed):
        message = f"The training run this page needs failed: {exc}"
        if request.url.path.startswith("/api/"):
            response = JSONResponse({"error": message}, status_code=500)
        else:
            response = render_error(request, 500, "The run failed", message)
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.exception_handler(StoreUnavailable)
    async def _store_down(request: Request, exc: StoreUnavailable):
        log.warning("store unavailable on %s: %s", request.url.path, exc)
        message = "The store of runs and uploads cannot be reached just now; try again."
        if request.url.path.startswith("/api/"):
            response = JSONResponse({"error": message}, status_code=503)
        else:
            response = render_error(request, 503, "Try again", message)
        response.headers.update({"Retry-After": "1", "Cache-Control": "no-store"})
        return response

    if settings.job_runner != "process":
        return
    runner = RunnerProcess(settings)
    app.state.job_runner = runner
    with_server(app, runner.start, runner.stop)  # the runner starts with the server and stops with it


DefaultRuns = Callable[[FastAPI], list[DefaultRun]]


def install_default_runs(app: FastAPI, kinds_runs: Sequence[DefaultRuns]) -> None:
    """The kinds' default runs, queued by the server itself when it starts (DEFAULT_RUNS): never by a GET."""
    def start() -> None:
        try:
            queue_default_runs(app.state.context.jobs, (job for runs in kinds_runs for job in runs(app)))
        except StoreUnavailable as exc:  # the store is down: the server still serves; a POST starts them later
            log.warning("default runs not queued: %s", exc)
    with_server(app, start, lambda: None)


def _refused(request: Request, status: int, title: str, message: str, retry_after_s: int):
    if request.url.path.startswith("/api/"):
        response = JSONResponse({"error": message}, status_code=status)
    else:
        response = render_error(request, status, title, message)
    response.headers.update({"Retry-After": str(retry_after_s), "Cache-Control": "no-store"})
    return response
