"""Application factory: wires settings, the catalog, the device, the routers and the kinds it is
given. It names no kind: app/house.py, the registry, calls it with the app's kinds."""
from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware

from app.domain.catalog import Catalog
from app.domain.uploads import UploadStore
from app.engine.runtime.device import resolve_device, set_threads
from app.web.context import BindContext, make_context
from app.web.errors import install_error_handlers
from app.web.kind import KindRegistry
from app.web.lifespan import with_server
from app.web.middleware.head import HeadMiddleware
from app.web.middleware.response_cache import ResponseCacheMiddleware
from app.web.middleware.security import SecurityHeadersMiddleware
from app.web.routes import docs, health, kind_routes, pages, walkthroughs_api
from app.web.settings import PROJECT_ROOT, Settings

log = logging.getLogger("app")

# Pages and JSON of an upload: replayed by the response cache only while the upload exists
# (uploads are never evicted, but an operator may delete one, from any process).
UPLOAD_PATH = re.compile(r"^/(?:api/)?walkthroughs/([0-9a-f]{16})(?:/|$)")


def _deleted_upload(store: UploadStore, path: str) -> bool:
    """An upload's path whose upload is gone: not replayed, so the route answers its 404."""
    match = UPLOAD_PATH.match(path)
    return match is not None and not store.exists(match.group(1))


def configure_process(settings: Settings) -> None:
    """What every process that computes needs, whatever serves it: the web process here, and each
    worker process that runs its torch (the compute pool). Torch's thread count is the process's
    own; everything else an app keeps is its AppContext's (app/web/context.py)."""
    set_threads(settings.torch_threads)


def _app_state(app: FastAPI, settings: Settings, kind_registry: KindRegistry) -> None:
    """What routes and kinds read from app.state, in the web app and in each compute worker's: its
    own context (job client, limiter, words for nodes, templates, static versions) among them."""
    from app.web.jobs.setup import job_client  # here: jobs_setup imports the routes
    app.state.context = make_context(settings, kind_registry, job_client(settings, kind_registry.tasks))
    app.state.settings = settings
    app.state.device = resolve_device(settings.device)
    app.state.kinds = kind_registry
    # Each file's kind is decided once, here and at upload, by the registry's first match.
    made = kind_registry.walkthrough_files(settings)  # the kinds' own (an added model's), after the folder's
    app.state.catalog = Catalog.load_directory(settings.walkthroughs_dir, kind_registry.classify,
                                               kind_registry.readers, [f.path for f in made])
    app.state.catalog.uploads = UploadStore.open(settings.resolved_data_dir, settings.database_url,
                                                 quota_mb=settings.upload_quota_mb, cache_mb=settings.upload_cache_mb)
    app.state.catalog.uploads.classify = kind_registry.classify
    app.state.catalog.uploads.readers = kind_registry.readers
    app.state.catalog.featured = kind_registry.featured + tuple(f.featured for f in made if f.featured is not None)


def worker_app(settings: Settings, kind_registry: KindRegistry) -> FastAPI:
    """A compute worker's app (app/web/compute_pool.py; configure_process already called): the
    state the web app has, so a job gets `request.app.state` and the catalog as a route would.
    Its routes and middleware are never served."""
    app = FastAPI()
    _app_state(app, settings, kind_registry)
    for kind in kind_registry.kinds:
        kind.install(app)
    return app


# A compute worker's set-up, by functions a spawned process imports by name (app/house.py's):
# (configure the process, build its app), each given the settings.
WorkerSetup = tuple[Callable[[Settings], None], Callable[[Settings], FastAPI]]


def _compute_executor(app: FastAPI, settings: Settings, workers: WorkerSetup | None):
    """The compute executor (app/web/executor.py): worker processes built by `workers`, or threads
    when COMPUTE_PROCESSES=0 or the caller has none (a test's own kinds, which a spawned worker could
    not import by name)."""
    from app.web.compute_pool import WorkerPool
    from app.web.executor import ComputeExecutor
    processes = settings.compute_processes and workers is not None
    pool = WorkerPool(settings, settings.compute_slots, *workers) if processes and workers else None
    context = app.state.context
    executor = ComputeExecutor(settings.compute_slots, settings.compute_queue, settings.compute_wait_s,
                               context.limiter, pool=pool, bind=context.bound)
    executor.app = app
    with_server(app, executor.start, executor.shutdown)  # workers start with the server and stop with it
    return executor


def _warm_up(app: FastAPI, settings: Settings) -> None:
    """The first pages drawn before /readyz says ready (app/web/warm_up.py), in the background: the
    server answers from the start (healthz, and any page, as it would cold)."""
    import asyncio

    from app.web.warm_up import Readiness, warm_web
    app.state.readiness = readiness = Readiness(enabled=settings.warm_up)
    if not settings.warm_up:
        return
    announce = f"GRPO walkthrough ready: http://{settings.host}:{settings.port}/"

    def start() -> None:
        print("GRPO walkthrough: warming up (each compute worker draws the featured walkthroughs once); "
              "the URL to open follows when it is ready.", flush=True)
        readiness.began = time.monotonic()
        app.state.warming = asyncio.get_running_loop().create_task(warm_web(app, readiness, announce))

    def stop() -> None:
        task = getattr(app.state, "warming", None)
        if task is not None:
            task.cancel()
    with_server(app, start, stop)


def build_app(settings: Settings, kind_registry: KindRegistry, workers: WorkerSetup | None = None) -> FastAPI:
    """The app, serving the kinds of `kind_registry` (app/house.py's create_app gives the registry's)."""
    configure_process(settings)

    # /docs is our own page (routes/docs.py: Swagger UI from /static, under the one CSP);
    # FastAPI's would load it from a CDN. No ReDoc: /redoc is a 404.
    app = FastAPI(title="GRPO walkthrough", version="0.1.0",
                  description="Every number computed by PyTorch on the server.",
                  docs_url=None, redoc_url=None)
    _app_state(app, settings, kind_registry)
    if settings.device == "auto":
        log.info("device auto -> %s", app.state.device)
    install_error_handlers(app, kind_registry.allowed_range)
    # Outermost last: HEAD served as GET (and 405s naming every method), security headers
    # on everything, then the response cache (it keeps compressed bodies, keyed on
    # Accept-Encoding), then compression.
    # Torch work runs on its own executor (app/web/executor.py: worker processes), never the
    # request thread pool; innermost, the body cap (middleware/limits.py) cuts what the routes
    # read, answering 413.
    from app.web.middleware.limits import BodyLimitMiddleware
    app.state.compute = _compute_executor(app, settings, workers)
    _warm_up(app, settings)
    app.add_middleware(BindContext, context=app.state.context)  # innermost: the routes run with it bound
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_kb * 1024,
                       upload_limit=kind_registry.upload_limit, upload_limits=kind_registry.upload_limits)
    app.add_middleware(GZipMiddleware, minimum_size=500, compresslevel=6)
    if settings.response_cache_mb > 0:
        app.add_middleware(ResponseCacheMiddleware, max_bytes=settings.response_cache_mb * 1024 * 1024,
                           skip=functools.partial(_deleted_upload, app.state.catalog.uploads))
    # ETag, Cache-Control, Vary and 304s (middleware/http_cache.py), outside the response cache;
    # the trailing-slash redirect is relative (Starlette's is absolute, built from Host).
    from app.web.middleware.http_cache import HttpCacheMiddleware, RelativeSlashRedirect
    app.add_middleware(HttpCacheMiddleware, static=app.state.context.static)
    app.router.redirect_slashes = False
    app.router.default = RelativeSlashRedirect(app.router)
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(HeadMiddleware, router=app.router)
    for kind in kind_registry.kinds:  # before the shared /static mount, which would take their paths
        if kind.static is not None:
            app.mount(f"/static/{kind.id}", StaticFiles(directory=kind.static), name=f"static-{kind.id}")
    app.mount("/static", StaticFiles(directory=PROJECT_ROOT / "static"), name="static")
    app.include_router(health.router)
    app.include_router(walkthroughs_api.router)
    for kind in kind_registry.kinds:  # a kind's state and handlers first: its routes may read them
        kind.install(app)
    kind_routes.install(app, kind_registry)  # the addresses every kind fills, and the kinds' own routes
    from app.web.jobs.setup import install_default_runs, install_jobs
    install_jobs(app, settings)
    if settings.default_runs:
        install_default_runs(app, [k.default_runs for k in kind_registry.kinds if k.default_runs is not None])
    app.include_router(docs.router)
    app.include_router(pages.router)
    return app

