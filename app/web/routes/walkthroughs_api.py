"""JSON API of the catalog, every kind alike: the walkthroughs, one's summary, and uploads.
Each kind's own endpoints come with its package (app/kinds/<kind>/web)."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Request, UploadFile
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.domain.uploads import MAX_BYTES, MB
from app.web.deps import CatalogDep, StrictQueryRoute, find_loaded, read_capped
from app.web.schemas.base import AsBuilt, AsBuiltList
from app.web.schemas.errors import ErrorBody, ValidationErrorBody, error
from app.web.schemas.walkthroughs import (
    UploadBody,
    WalkthroughItem,
    WalkthroughSummary,
    upload_payload,
    walkthrough_item,
    walkthrough_summary,
)

router = APIRouter(prefix="/api", tags=["api"], route_class=StrictQueryRoute)

UNKNOWN = error("Unknown walkthrough, or one whose file failed to load.")


@router.get("/walkthroughs", response_model=AsBuiltList, responses={200: {"model": list[WalkthroughItem]}})
def list_walkthroughs(cat: CatalogDep) -> list[dict]:
    return [walkthrough_item(e) for e in cat.entries()]


@router.get("/walkthroughs/{walkthrough_id}", response_model=AsBuilt,
            responses={200: {"model": WalkthroughSummary}, 404: UNKNOWN})
def get_walkthrough(walkthrough_id: str, cat: CatalogDep) -> dict:
    return walkthrough_summary(find_loaded(cat, walkthrough_id))


@router.post("/walkthroughs", status_code=201, responses={
    201: {"model": UploadBody, "description": "Uploaded"},
    200: {"model": UploadBody, "description": "Already uploaded"},
    413: error(f"Too large: a tensorviz snapshot may be up to {MAX_BYTES // MB} MB, a kind's own file format "
               "up to its own limit; `error` names the limits."),
    # UploadRejected sends {"error"}; a request without a `file` part gets the validation body
    422: error("Not a valid export (`error` says why), or no `file` part (`detail` names it).",
               ErrorBody | ValidationErrorBody),
    409: error("Other bytes are already stored under this file's id (a SHA-256 prefix collision)."),
    503: error("The upload store cannot be reached just now; try again."),
    507: error("The upload store is full (UPLOAD_QUOTA_MB): nothing was stored, and no earlier upload "
               "was removed to make room."),
})
async def upload_walkthrough(request: Request, file: Annotated[UploadFile, File()], cat: CatalogDep):
    """Open your own `tensorviz.graph` export (or a file in a kind's own format): validated like the
    built-in ones, kept by content hash."""
    raw = await read_capped(request, file)
    entry, created = await run_in_threadpool(cat.uploads.add, raw, file.filename or "upload.json")
    return JSONResponse(upload_payload(entry), status_code=201 if created else 200)
