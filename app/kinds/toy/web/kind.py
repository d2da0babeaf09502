"""The toy kind (ToyGRPO: four choices, one per completion), as the house registers it."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.kinds.toy.domain.process_spec import load_processes
from app.kinds.toy.engine.grpo_step import TrainingDiverged
from app.kinds.toy.engine.node_map import KIND_ID, is_runnable
from app.kinds.toy.views.form import allowed_range
from app.kinds.toy.views.meaning import describe_toy
from app.kinds.toy.web import api, processes
from app.kinds.toy.web.pages import step_page
from app.web.kind import Kind


def install(app: FastAPI) -> None:
    app.state.processes = load_processes(app.state.settings.processes_file)  # a bad file stops start-up
    app.include_router(api.router)
    app.include_router(processes.router)

    @app.exception_handler(TrainingDiverged)
    async def _diverged(_request: Request, exc: TrainingDiverged):
        detail = [{"param": "learning_rate", "message": str(exc), "allowed": allowed_range("learning_rate")}]
        return JSONResponse({"error": f"learning_rate: {exc}", "detail": detail}, status_code=422)


KIND = Kind(id=KIND_ID, title="ToyGRPO: a four-choice policy, one choice per completion",
            matches=is_runnable, step_page=step_page, install=install,
            templates=Path(__file__).resolve().parents[1] / "templates", describe=describe_toy,
            allowed_range=allowed_range)
