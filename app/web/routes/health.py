from fastapi import APIRouter

from ..schemas.base import AsBuilt
from ..schemas.health import HealthBody

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=AsBuilt, responses={200: {"model": HealthBody}})
def healthz() -> dict:
    """For load balancers: the process is up and serving."""
    return {"status": "ok"}
