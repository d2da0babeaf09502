"""Application factory: wires settings, the catalog, the device and the routers."""
from __future__ import annotations

import logging

import torch
from fastapi import FastAPI

from .catalog import Catalog
from .engine import resolve_device
from .errors import install_error_handlers
from .routes import api, health
from .settings import Settings

log = logging.getLogger("app")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    device = resolve_device(settings.device)
    if settings.device == "auto":
        log.info("device auto -> %s", device)
    torch.set_num_threads(settings.torch_threads)

    app = FastAPI(title="GRPO walkthrough", version="0.1.0",
                  description="Every number computed by PyTorch on the server.")
    app.state.settings = settings
    app.state.device = device
    app.state.catalog = Catalog.load_directory(settings.walkthroughs_dir)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(api.router)
    return app


app = create_app()
