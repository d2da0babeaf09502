"""Things that start with the server and stop with it (the compute workers, the job runner)."""
from __future__ import annotations

import contextlib
from collections.abc import Callable

from fastapi import FastAPI


def with_server(app: FastAPI, start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Run `start` when the app's lifespan begins and `stop` when it ends, around whatever the
    lifespan already does (so several pieces stack, each stopped even if a later one fails)."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async with inner(app) as state:
            start()
            try:
                yield state
            finally:
                stop()
    app.router.lifespan_context = lifespan
