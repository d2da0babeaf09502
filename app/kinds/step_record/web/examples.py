""""Try an example": a shipped record opened as an upload would be (the same Reader, the same
store, the same id from its bytes), by a POST from the upload page, which then redirects to its first
step; the API's twin answers as `POST /api/walkthroughs` does. Stored once: a second click finds it."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse

from app.domain.catalog import CatalogEntry
from app.kinds.step_record.examples import BY_NAME, EXAMPLES
from app.views.urls import URLS
from app.web.deps import CatalogDep, StrictQueryRoute
from app.web.errors import NotFound
from app.web.schemas.errors import ValidationErrorBody, error
from app.web.schemas.walkthroughs import UploadBody, upload_payload

router = APIRouter(route_class=StrictQueryRoute)


async def _open(cat, name: str) -> tuple[CatalogEntry, bool]:
    example = BY_NAME.get(name)
    if example is None:
        raise NotFound(f"no example named {name!r} (there are {', '.join(e.name for e in EXAMPLES)})")
    raw = example.path.read_bytes()
    return await run_in_threadpool(cat.uploads.add, raw, example.file)


@router.post("/walkthroughs/new/examples/{name}", include_in_schema=False)
async def open_example_page(request: Request, name: str, cat: CatalogDep):
    entry, _ = await _open(cat, name)
    return RedirectResponse(URLS.step(entry.id, entry.snapshot.opening_step_id), status_code=303)


@router.post("/api/walkthroughs/examples/{name}", tags=["api"], status_code=201, responses={
    201: {"model": UploadBody, "description": "Stored"},
    200: {"model": UploadBody, "description": "Already stored"},
    404: error("No example of that name; `error` lists the names."),
    422: error("An unknown query parameter; `detail` names it.", ValidationErrorBody),
    503: error("The upload store cannot be reached just now; try again."),
    507: error("The upload store is full (UPLOAD_QUOTA_MB): nothing was stored."),
})
async def open_example(name: str, cat: CatalogDep) -> JSONResponse:
    """Store one of the shipped example step records (trl, unipo) as if uploaded; its id and first step."""
    entry, created = await _open(cat, name)
    return JSONResponse(upload_payload(entry), status_code=201 if created else 200)
