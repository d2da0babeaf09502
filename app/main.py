"""Application factory: wires settings, the catalog, the device and the routers."""
from __future__ import annotations

import logging

import torch
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware

from .catalog import Catalog
from .engine import resolve_device
from .engine.compute import LIMITER
from .process_spec import load_processes
from .errors import install_error_handlers
from .routes import api, health, pages, processes
from .response_cache import ResponseCacheMiddleware
from .security import SecurityHeadersMiddleware
from .settings import PROJECT_ROOT, Settings
from .uploads import UPLOAD_PATH, UploadStore

log = logging.getLogger("app")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    device = resolve_device(settings.device)
    if settings.device == "auto":
        log.info("device auto -> %s", device)
    torch.set_num_threads(settings.torch_threads)
    LIMITER.configure(settings.compute_slots, settings.compute_queue)

    app = FastAPI(title="GRPO walkthrough", version="0.1.0",
                  description="Every number computed by PyTorch on the server.")
    app.state.settings = settings
    app.state.device = device
    app.state.catalog = Catalog.load_directory(settings.walkthroughs_dir)
    app.state.catalog.uploads = UploadStore(settings.uploads_dir, settings.max_uploads)
    app.state.processes = load_processes(settings.processes_file)  # a bad file stops start-up: it is ours
    install_error_handlers(app)
    # Outermost last: security headers on everything, then the response cache
    # (it keeps compressed bodies, keyed on Accept-Encoding), then compression.
    app.add_middleware(GZipMiddleware, minimum_size=500, compresslevel=6)
    if settings.response_cache_mb > 0:
        app.add_middleware(ResponseCacheMiddleware, max_bytes=settings.response_cache_mb * 1024 * 1024,
                           skip=UPLOAD_PATH.match)  # an upload can be evicted: never replay it
    app.add_middleware(SecurityHeadersMiddleware)
    app.mount("/static", StaticFiles(directory=PROJECT_ROOT / "static"), name="static")
    app.include_router(health.router)
    app.include_router(api.router)
    app.include_router(processes.router)
    app.include_router(pages.router)
    return app


def __getattr__(name: str):
    # `uvicorn app.main:app` works without building an app whenever app.main is imported.
    if name == "app":
        return create_app()
    raise AttributeError(name)
