"""JSON API: walkthroughs, their summaries and live tensors. Thin: domain does the work."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Query, Request, UploadFile
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from ..catalog import Catalog
from ..engine import GRPOParams, run_grpo_step
from ..engine.processes import run_process
from ..engine.stage_step import stage_step
from ..process_spec import ProcessCatalog
from ..errors import NotRunnable
from ..payloads import is_runnable, tensors_payload, upload_payload, walkthrough_item, walkthrough_summary
from .deps import read_capped, catalog, find_process, find_stage, grpo_params, process_catalog, check_node, check_step, device, find_entry, find_snapshot

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
    processes: Annotated[ProcessCatalog, Depends(process_catalog)],
    params: Annotated[GRPOParams, Depends(grpo_params)],
    step: Annotated[str | None, Query(description="Only the nodes visible in this step's view.")] = None,
    node: Annotated[str | None, Query(description="Only this node.")] = None,
    process: Annotated[str | None, Query(description="A training path (r1-zero, r1, distillation): show "
                                         "its stage's last training step instead of the walkthrough's step. "
                                         "Uses `seed` and `prompt`; other GRPO parameters are the stage's own.")] = None,
    stage: Annotated[str | None, Query(description="The process stage (default: its last).")] = None,
) -> dict:
    snapshot = find_snapshot(cat, walkthrough_id)
    check_step(snapshot, step)
    check_node(snapshot, node)
    if not is_runnable(snapshot):
        raise NotRunnable(f"walkthrough {walkthrough_id!r} is view-only: no runnable model matches its nodes")
    if process is None:
        if stage is not None:
            raise RequestValidationError([{"loc": ("query", "stage"), "type": "value_error",
                                           "msg": "needs a process: add process=r1-zero, r1 or distillation"}])
        result = run_grpo_step(params, dev)
        return tensors_payload(walkthrough_id, snapshot, result, step, node)
    proc = find_process(processes, process)
    stage_id = find_stage(proc, stage).id if stage is not None else proc.stages[-1].id
    result = stage_step(run_process(processes, proc.id, params.seed), stage_id, params.prompt)
    return {"process": proc.id, "stage": stage_id, **tensors_payload(walkthrough_id, snapshot, result, step, node)}


@router.post("/walkthroughs", status_code=201, responses={200: {"description": "Already uploaded"},
                                                          413: {"description": "Over 2 MB"},
                                                          422: {"description": "Not a valid export"}})
async def upload_walkthrough(request: Request, file: Annotated[UploadFile, File()],
                             cat: Annotated[Catalog, Depends(catalog)]):
    """Open your own `tensorviz.graph` export: validated like the built-in ones, kept by content hash."""
    raw = await read_capped(file)
    entry, created = await run_in_threadpool(cat.uploads.add, raw, file.filename or "upload.json")
    return JSONResponse(upload_payload(entry), status_code=201 if created else 200)
