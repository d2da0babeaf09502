"""Which number the token strips show first on each of the tiny-LM walkthrough's steps."""
from __future__ import annotations

from app.views.tokens.token_view import TokenGroup, TokenPanel
from app.views.tokens.token_view import build_token_panel as build_strips

STEP_METRIC = {"sample": "logp_old", "rewards": "logp_old", "advantages": "advantage", "ratio": "ratio",
               "kl": "kl", "aggregation": "grad", "update": "delta"}


def build_token_panel(result: TokenGroup, step_id: str, metric_id: str | None = None) -> TokenPanel:
    return build_strips(result, step_id, metric_id, STEP_METRIC.get(step_id, "grad"))
