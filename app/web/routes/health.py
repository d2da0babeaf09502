from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.web.schemas.base import AsBuilt
from app.web.schemas.errors import error
from app.web.schemas.health import HealthBody, ReadyBody

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=AsBuilt, responses={200: {"model": HealthBody}})
async def healthz() -> dict:
    """For load balancers: the process is up and serving. Answered on the event loop itself,
    so no load on the thread pools (the request pool, the compute executor) can delay it."""
    return {"status": "ok"}


@router.get("/readyz", response_model=AsBuilt, responses={
    200: {"model": ReadyBody, "description": "Serving its first pages at warm speed."},
    503: error("Still warming up: `stage` says where.", ReadyBody, headers={"Retry-After": {
        "description": "Seconds to wait before asking again.", "schema": {"type": "integer"}}})})
async def readyz(request: Request) -> JSONResponse:
    """For load balancers and `make run`: the process serves its first pages at warm speed. 503 while
    its compute workers draw the featured walkthroughs and it replays them into its cache (WARM_UP,
    app/web/warm_up.py): `stage`, `seconds` so far, `pages` drawn. Answered on the event loop."""
    readiness = request.app.state.readiness
    body = readiness.body()
    if readiness.ready:
        return JSONResponse(body, headers={"Cache-Control": "no-store"})
    return JSONResponse(body, status_code=503, headers={"Cache-Control": "no-store", "Retry-After": "1"})
