"""JSON API of the tiny-LM walkthrough: its token-level GRPO step. Thin: the engine does the work."""
from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from app.kinds.tiny_lm.domain.kind_id import KIND_ID
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.step import run_token_step
from app.kinds.tiny_lm.web.deps import TokenParamsDep
from app.kinds.tiny_lm.web.schemas.tokens import tokens_payload
from app.web.deps import (
    CatalogDep,
    ComputeDep,
    find_run,
)
from app.web.json_body import accepts_gzip, json_response
from app.web.schemas.errors import BUSY, ValidationErrorBody, error

# The step's JSON, run by the house's /api/walkthroughs/{id}/step for the tiny LM's walkthroughs (web/kind.py)
TOKENS_RESPONSES = {
    404: error("Unknown walkthrough, step or node."),
    409: error("The walkthrough is not the tiny-LM one: no token-level model matches its nodes."),
    422: error("A parameter is out of range or malformed; `detail` names it.", ValidationErrorBody),
    503: BUSY,
}


async def get_tokens(request: Request, walkthrough_id: str, cat: CatalogDep, params: TokenParamsDep,
                     compute: ComputeDep,
                     step: Annotated[str | None, Query(description="The step being viewed (echoed).")] = None,
                     node: Annotated[str | None, Query(description="Send this node's every value and gradient "
                                                                   "instead of every node's summary.")] = None,
                     ) -> Response:
    """The tiny LM's token-level GRPO step: the prompt, each completion with its reward parts and
    advantage, and per token log π, log π_old, log π_ref, ρ, clip, KL, weight w, ∂loss/∂log π (`grad`)
    with its two parts `grad_surrogate` (from the clipped advantage term) and `grad_kl` (from the KL
    penalty β·KL; they add up to `grad`), and log π after one optimiser step; the loss under each
    aggregation; per node a summary of its value and gradient (shape, min, max, mean, norms), or with
    `node` that node's full tensors."""
    gzip_ok = accepts_gzip(request)
    find_run(cat, walkthrough_id, KIND_ID, step, node,
             f"walkthrough {walkthrough_id!r} is not a token-level walkthrough")
    return await compute.run_in_app(_tokens, walkthrough_id, params, step, node, gzip_ok)


def _tokens(app, walkthrough_id: str, params: TokenParams, step: str | None, node: str | None,
            gzip_ok: bool) -> Response:
    """On the compute executor (a worker process): the step, its JSON and gzip (app/web/executor.py)."""
    return json_response(tokens_payload(walkthrough_id, run_token_step(params, app.state.device), step, node),
                         gzip_ok)
