"""The jobs of one process: the store, the kinds' tasks and where runs are computed.

`configure_jobs` runs in every process that reads jobs (app/web/factory.configure_process: the
web process and each compute worker); `install_jobs` adds to the web app the paths API, the
answers for a failed or unfinished run, and, with JOB_RUNNER=process, the runner child process.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.engine.jobs.client import JOBS, JobFailed
from app.engine.jobs.tasks import JobTask
from app.stores.jobs import open_job_backend
from app.stores.uploads import StoreUnavailable
from app.web.jobs import paths_api
from app.web.jobs.runner_process import RunnerProcess
from app.web.lifespan import with_server
from app.web.rendering import render_error
from app.web.settings import Settings

log = logging.getLogger("app.jobs")


def configure_jobs(settings: Settings, tasks: Mapping[str, JobTask]) -> None:
    """The client of this process. With JOB_RUNNER=process (a served app) no process but the runner
    child computes; "thread" (the test suite's in-process apps) starts runner threads on first use."""
    store = open_job_backend(settings.resolved_data_dir, settings.database_url)
    JOBS.configure(store, tasks, settings.job_runner, settings.job_lease_s)


def install_jobs(app: FastAPI, settings: Settings) -> None:
    paths_api.install(app)

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
