"""JSON API of the training paths: definitions, runs with curves, and a comparison. Thin."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from ..engine.processes import run_process
from ..process_payloads import comparison_payload, process_run_payload, processes_payload
from ..process_spec import ProcessCatalog
from .deps import find_process, process_catalog

router = APIRouter(prefix="/api/processes", tags=["processes"])

Seed = Annotated[int, Query(ge=0, le=2**31 - 1, description="Seeds every sampling step of the path.")]
Scale = Annotated[int, Query(ge=1, le=8, description="Multiplies every stage's iteration count.")]


@router.get("")
def list_processes(processes: Annotated[ProcessCatalog, Depends(process_catalog)]) -> dict:
    return processes_payload(processes)


@router.get("/compare")
def compare(processes: Annotated[ProcessCatalog, Depends(process_catalog)], seed: Seed = 0,
            iterations_scale: Scale = 1) -> dict:
    runs = [run_process(processes, pid, seed, iterations_scale) for pid in processes.ids]
    return comparison_payload(processes, runs)


@router.get("/{process_id}")
def get_process_run(process_id: str, processes: Annotated[ProcessCatalog, Depends(process_catalog)],
                    seed: Seed = 0, iterations_scale: Scale = 1) -> dict:
    find_process(processes, process_id)
    return process_run_payload(processes, run_process(processes, process_id, seed, iterations_scale))
