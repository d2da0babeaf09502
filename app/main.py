"""`uvicorn app.main:app` (or `app.main:create_app --factory`): the app, built from the environment.

The app is built by `app.house` (the kinds, then the shared factory); this module only names the entry point.
"""
from __future__ import annotations

from app.house import create_app

__all__ = ["create_app"]


def __getattr__(name: str):
    # `app` is built on first access, so importing app.main costs nothing.
    if name == "app":
        return create_app()
    raise AttributeError(name)
