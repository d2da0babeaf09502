"""The step-record kind (a GRPO step recorded from TRL, verl or UNIPO), as the house registers it.

Its files are records, not snapshots: the kind's Reader (domain/opening.py) opens them, in the
walkthroughs folder, from the upload page, `POST /api/walkthroughs` or `python -m app open FILE`.
A bare snapshot of the head's graph is never a record (`matches` is False: there is no data).
Whole runs (many steps, their logged metrics, the explorer) are not this kind's: they are app/runs/,
which reads records through this kind and links its recorded steps to this kind's pages."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from app.kinds.step_record.domain.kind_id import KIND_ID
from app.kinds.step_record.domain.opening import READER
from app.kinds.step_record.engine import export_target
from app.kinds.step_record.examples import EXAMPLES
from app.kinds.step_record.views.meaning import describe_record
from app.kinds.step_record.web import api, examples, pages
from app.views.urls import STEP_API
from app.web.kind import Kind, KindRoute, Moved


def install(app: FastAPI) -> None:
    # the upload page's "Try an example" lists the shipped records (upload_help.html)
    app.state.context.templates.env.globals["step_record_examples"] = EXAMPLES


HERE = Path(__file__).resolve().parents[1]

KIND = Kind(id=KIND_ID, title="A recorded GRPO step: your own run, token by token",
            matches=lambda snapshot: False, step_page=pages.step_page, install=install,
            templates=HERE / "templates", static=HERE / "static", stylesheets=("record.css",),
            describe=describe_record, reader=READER, upload_help="step_record/upload_help.html",
            export_targets=export_target.TARGETS,
            step_api=(KindRoute(api.get_record, responses=api.RECORD_RESPONSES),),
            # the format's JSON Schema and the shipped examples' "open this one" are the records' alone
            routers=(api.router, examples.router),
            moved=(Moved("/api/walkthroughs/{walkthrough_id}/record", STEP_API),))
