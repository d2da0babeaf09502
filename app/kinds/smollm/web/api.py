"""JSON API of the real model's step: `POST` starts it (a job, as the page's Run does), `GET` reads it and
never starts one. Done, it answers every node: the GRPO head's with their full values and gradients; each
module inside the three Llamas with its shape and summary, or with `node` its per-token norms of value and
gradient over the width and its widest dimensions (the kept attention block's softmax also with its weights,
per answer and head). Thin: the job store and engine/step_task.py do the work."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo
from starlette.concurrency import run_in_threadpool

from app.engine.jobs.client import JobClient, NotStarted
from app.kinds.smollm.domain.kind_id import KIND_ID
from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.node_map import block_count
from app.kinds.smollm.engine.params import TEXT_FIELDS, SmolParams
from app.kinds.smollm.engine.step_records import SmolStepResult
from app.kinds.smollm.web.model_choice import required_model
from app.stores.jobs import JobRecord
from app.views.param_fields import field_range
from app.web.deps import CatalogDep, DeviceDep, find_loaded
from app.web.errors import NotFound, NotRunnable
from app.web.jobs.start import start_jobs
from app.web.schemas.errors import INVALID, NotStartedBody, error
from app.web.schemas.jobs import PathJobBody, job_payload

# The query-string face of SmolParams: text as typed, so SmolParams checks every range and names its field.
SmolQueryModel = create_model(
    "SmolQuery", __config__=ConfigDict(extra="ignore"),
    **{name: (str | None, FieldInfo(default=None, description=f.description))
       for name, f in SmolParams.model_fields.items()},
)


async def smol_params(query: Annotated[SmolQueryModel, Query()]) -> SmolParams:  # type: ignore[valid-type]
    given = {k: (None if v == "none" and k not in TEXT_FIELDS else v)
             for k, v in query.model_dump(exclude_none=True).items()}  # type: ignore[attr-defined]
    if given.get("prompt_text") == "":
        given["prompt_text"] = " "  # sent empty: refused as empty (a blank number field means its default)
    try:
        return SmolParams(**given)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"]),
                                       "allowed": field_range(str(e["loc"][0]) if e["loc"] else "", SmolParams)}
                                      for e in exc.errors()]) from None


SmolParamsDep = Annotated[SmolParams, Depends(smol_params)]
Node = Annotated[str | None, Query(description="Send this node's numbers in full (a head node: its values and "
                                                "gradient; a module inside a Llama: per-token norms of value and "
                                                "gradient, its widest dimensions) instead of every node's summary.")]
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": PathJobBody, "description": "Done (`result`: the resolved parameters, conventions and optimiser, "
                                               "the group with every token's numbers, the loss, ‖∂loss/∂W‖ per block, "
                                               "what the update moved, and the nodes) or failed (`error`)."},
    202: {"model": PathJobBody, "description": "Queued or running: poll the same URL (a queued step nobody reads "
                                               "for 60 s expires)."},
    404: error("Unknown walkthrough or node, or (GET) a step nobody has started: `start` names the POST.",
               NotStartedBody),
    409: error("The walkthrough is not the real model's, or its checkpoint is not installed here."),
    422: INVALID,
    503: error("The job store cannot be reached just now, or (POST) the queue is full: nothing was stored; try "
               "again.", headers=RETRY_AFTER),
}
POST_RESPONSES: dict[int | str, dict[str, Any]] = {
    **RESPONSES, 429: error("This client has started its share of runs: nothing was stored.", headers=RETRY_AFTER)}


def _check(request: Request, cat, walkthrough_id: str, params: SmolParams) -> Path | None:
    """The GGUF file the walkthrough runs (None: the default model's); NotRunnable for another kind's or a
    model not here, a 422 for a block its graph lacks."""
    entry = find_loaded(cat, walkthrough_id)
    if entry.kind != KIND_ID:
        raise NotRunnable(f"walkthrough {walkthrough_id!r} is not the real model's")
    model = required_model(request, walkthrough_id)
    assert entry.snapshot is not None
    n_layer = block_count(entry.snapshot.node_ids)
    if params.attention_block is not None and params.attention_block >= n_layer:
        raise RequestValidationError([{"type": "value_error", "loc": ("query", "attention_block"),
                                       "msg": f"the model has {n_layer} blocks (0 to {n_layer - 1})",
                                       "input": params.attention_block, "allowed": f"0 to {n_layer - 1}"}])
    return model


def attention_node(result: SmolStepResult) -> str:
    """The softmax node of the block whose per-head attention weights the step kept (engine/step.py)."""
    return f"softmax@policy.blocks.{result.attention_block}.attention#0"


def nodes_payload(result: SmolStepResult, node: str | None) -> dict[str, Any]:
    """Every node's shape and summary, or one node in full (NotFound for an id the step did not record)."""
    if node is None:
        out: dict[str, Any] = {nid: {"size": "head", "shape": list(h.shape), "dtype": h.dtype,
                                     "has_grad": h.grad is not None} for nid, h in result.head.items()}
        out.update({nid: {"size": "per-token", "shape": list(w.shape), "summary": vars(w.summary)}
                    for nid, w in result.wide.items()})
        return {"nodes": out}
    if node in result.head:
        h = result.head[node]
        return {"node": {"id": node, "size": "head", "shape": list(h.shape), "dtype": h.dtype, "values": h.values,
                         "grad": h.grad, "no_grad_reason": h.no_grad_reason}}
    if node in result.wide:
        w = result.wide[node]
        body = {"id": node, "size": "per-token", "shape": list(w.shape), "token_axis": w.token_axis,
                "value_norm": w.value_norm.tolist(), "grad_norm": None if w.grad_norm is None else w.grad_norm.tolist(),
                "top_dims": [list(d) for d in w.top_dims], "summary": vars(w.summary)}
        if node == attention_node(result):  # the block whose weights the step kept: every head's, per answer
            body["weights"] = list(result.attention)
        return {"node": body}
    raise NotFound(f"node {node!r} was not recorded in this step (a block the model lacks, or no such node)")


def _answer(jobs: JobClient, job: JobRecord, node: str | None) -> JSONResponse:
    result = None
    if job.state == "done":
        value = jobs.result(job)
        if value is not None:
            result = {**step_task.payload(step_task.SmolStepJob.model_validate(job.params), value),
                      **nodes_payload(value, node)}
    headers = {} if job.state == "done" else {"Cache-Control": "no-store"}
    return JSONResponse(job_payload(job, result), status_code=200 if job.finished else 202, headers=headers)


def get_step(request: Request, walkthrough_id: str, cat: CatalogDep, dev: DeviceDep, params: SmolParamsDep,
             node: Node = None) -> JSONResponse:
    """The real model's GRPO step for these parameters, as its job stands. A GET never starts it: a step nobody
    started is a 404 naming the POST that does."""
    model = _check(request, cat, walkthrough_id, params)
    job = request.app.state.context.jobs.find(step_task.step_job(params, dev, model))
    if job is None:
        raise NotStarted([step_task.title(step_task.step_params(params, dev, model))],
                         start=f"POST {request.url.path}{'?' + request.url.query if request.url.query else ''}")
    return _answer(request.app.state.context.jobs, job, node)


async def start_step(request: Request, walkthrough_id: str, cat: CatalogDep, dev: DeviceDep, params: SmolParamsDep,
                     node: Node = None) -> JSONResponse:
    """Start the step (a failed one again; one queued, running or done is read as it is): computed once by the
    real model's runner and kept. Limited per client (429) and by the queue's bound (503)."""
    model = _check(request, cat, walkthrough_id, params)
    (job,) = await start_jobs(request, [step_task.step_job(params, dev, model)])
    return await run_in_threadpool(_answer, request.app.state.context.jobs, job, node)
