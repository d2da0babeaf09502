from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    """For load balancers: the process is up and serving."""
    return {"status": "ok"}
