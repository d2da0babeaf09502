"""JSON API: walkthroughs, their summaries and live tensors. Thin: domain does the work."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from ..catalog import Catalog
from ..engine import GRPOParams, run_grpo_step
from ..errors import NotRunnable
from ..payloads import is_runnable, tensors_payload, walkthrough_item, walkthrough_summary
from .deps import catalog, grpo_params, check_node, check_step, device, find_entry, find_snapshot

router = APIRouter(prefix="/api", tags=["api"])


@router.get("/walkthroughs")
def list_walkthroughs(cat: Annotated[Catalog, Depends(catalog)]) -> list[dict]:
    return [walkthrough_item(e) for e in cat.entries()]


@router.get("/walkthroughs/{walkthrough_id}")
def get_walkthrough(walkthrough_id: str, cat: Annotated[Catalog, Depends(catalog)]) -> dict:
    find_snapshot(cat, walkthrough_id)
    return walkthrough_summary(find_entry(cat, walkthrough_id))


@router.get("/walkthroughs/{walkthrough_id}/tensors")
def get_tensors(
    walkthrough_id: str,
    cat: Annotated[Catalog, Depends(catalog)],
    dev: Annotated[str, Depends(device)],
    params: Annotated[GRPOParams, Depends(grpo_params)],
    step: Annotated[str | None, Query(description="Only the nodes visible in this step's view.")] = None,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
) -> dict:
    snapshot = find_snapshot(cat, walkthrough_id)
    check_step(snapshot, step)
    check_node(snapshot, node)
    if not is_runnable(snapshot):
        raise NotRunnable(f"walkthrough {walkthrough_id!r} is view-only: no runnable model matches its nodes")
    result = run_grpo_step(params, dev)
    return tensors_payload(walkthrough_id, snapshot, result, step, node)
