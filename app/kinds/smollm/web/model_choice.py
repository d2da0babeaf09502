"""Which GGUF file a real-model walkthrough runs, for the kind's routes: an added model's own file (its
walkthrough's stamp, engine/own_models.py), else the installed default (None in a job's params)."""
from __future__ import annotations

from pathlib import Path

from fastapi import Request

from app.kinds.smollm.engine import checkpoint
from app.kinds.smollm.engine.own_models import model_file
from app.web.errors import NotRunnable


def own_model(request: Request, walkthrough_id: str) -> Path | None:
    return model_file(walkthrough_id, request.app.state.settings.resolved_data_dir)


def required_model(request: Request, walkthrough_id: str) -> Path | None:
    """own_model, or NotRunnable (409) when the file it runs is not on this server."""
    own = own_model(request, walkthrough_id)
    if not checkpoint.runnable(own):
        raise NotRunnable(f"the model file {own} of walkthrough {walkthrough_id!r} is gone" if own is not None else
                          f"the real model's checkpoint is not installed on this server ({checkpoint.INSTALL_HINT})")
    return own
