"""The tiny-LM kind (TinyLMGRPO: completions of tokens), as the house registers it."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from app.kinds.tiny_lm.engine.token_node_map import KIND_ID, is_token_runnable
from app.kinds.tiny_lm.views.meaning_tiny_lm import describe_tiny_lm
from app.kinds.tiny_lm.web import api, pages
from app.web.kind import Kind


def install(app: FastAPI) -> None:
    app.include_router(api.router)
    app.include_router(pages.router)


KIND = Kind(id=KIND_ID, title="A tiny language model: completions of tokens",
            matches=is_token_runnable, step_page=pages.step_page, install=install,
            templates=Path(__file__).resolve().parents[1] / "templates", describe=describe_tiny_lm)
