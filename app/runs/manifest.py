"""The runs as the house registers them: a Kind's manifest with no step page (runs match no snapshot; their
pages are their own routes, named in ROUTERS), its store and commands, its templates, static files and upload help, and
where a recorded step sits in its run (`part_of`, asked by the step-record kind's page)."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request

from app.runs.views.run_part import run_part
from app.runs.web import (
    open_command,
    run_cli,
    run_compare_pages,
    run_diff_pages,
    run_follow_pages,
    run_pages,
    run_upload,
    runs_command,
)
from app.views.screen import PartOf
from app.web.kind import Kind

RUNS_ID = "run_explorer"  # a distinct word: the shared layers are checked for naming none (tests/web/test_house.py)


def install(app: FastAPI) -> None:
    run_compare_pages.install(app)  # runs compared (issue 50): before the explorer, whose /runs/{id} would take it
    run_pages.install(app)  # the run explorer (issue 34) and its store (app.state.run_store)
    run_diff_pages.install(app)  # two of its recorded steps compared
    run_upload.install(app)  # a whole run sent from the browser as one archive


def part_of(request: Request, walkthrough_id: str) -> PartOf | None:
    """A recorded step's place in its run: the run (at this step) and the recorded steps beside it."""
    store = getattr(request.app.state, "run_store", None)
    found = store.recording(walkthrough_id) if store is not None else None
    return run_part(*found) if found is not None else None


HERE = Path(__file__).resolve().parent
# Its routes, in this order: runs compared before the explorer (whose /runs/{id} would take /runs/compare), a
# followed run's status (polled by its explorer), the explorer and its JSON, two recorded steps compared, a run
# sent from the browser as one archive
ROUTERS = (run_compare_pages.pages, run_compare_pages.api, run_follow_pages.router, run_pages.pages, run_pages.api,
           run_diff_pages.pages, run_diff_pages.api, run_upload.pages, run_upload.api)

RUNS = Kind(id=RUNS_ID, title="Whole training runs: every logged metric, followed, compared", install=install,
            templates=HERE / "templates", static=HERE / "static", stylesheets=("runs.css",),
            upload_help="run_explorer/upload_help.html", part_of=part_of,
            commands={"open": open_command.main, "findings": run_cli.main, "runs": runs_command.main},
            routers=ROUTERS)
