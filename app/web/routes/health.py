from fastapi import APIRouter

from app.web.schemas.base import AsBuilt
from app.web.schemas.health import HealthBody

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=AsBuilt, responses={200: {"model": HealthBody}})
async def healthz() -> dict:
    """For load balancers: the process is up and serving. Answered on the event loop itself,
    so no load on the thread pools (the request pool, the compute executor) can delay it."""
    return {"status": "ok"}
