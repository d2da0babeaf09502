"""The tiny LM's part of the URL state: the step's parameters (TokenParams, a refused value kept with its
message for the form), which metric, completion and attention head are shown, and a training path
(`?process=`, with `?overlay=all` for the three paths together).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from app.domain.training_paths import OLD_URL_KEYS, PATH_IDS, URL_KEY, canonical_path_id
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.views.token_form import TOKEN_FIELDS, TokenForm, token_query
from app.views.tokens.token_view import METRICS

OVERLAY_KEY, OVERLAY_ALL = "overlay", "all"  # ?overlay=all: the paths box draws the three paths together


class BadTokenView(ValueError):
    """A view value (metric, completion, head) that does not exist; the message names it."""


@dataclass(frozen=True)
class TokenQuery:
    params: TokenParams
    form: TokenForm | None  # set when the typed parameters were refused
    metric: str | None
    completion: int
    head: int
    path: str | None = None  # a training path to run and show (engine/lm_paths.py), a shared id
    overlay: bool = False  # ?overlay=all: the three paths on one chart per metric (only with a path)

    def query(self) -> dict[str, str]:
        """The tiny LM's part of the URL (app/views/view_state.py's KindState), in URL order."""
        q = dict(token_query(self.params))
        if self.metric:
            q["metric"] = self.metric
        if self.completion:
            q["completion"] = str(self.completion)
        if self.head:
            q["head"] = str(self.head)
        if self.path:
            q[URL_KEY] = self.path
            if self.overlay:
                q[OVERLAY_KEY] = OVERLAY_ALL
        return q


def _index(raw: str | None, name: str) -> int:
    if raw is None or raw == "":
        return 0
    if not raw.isdigit() or len(raw) > 3:
        raise BadTokenView(f"{name} must be a small whole number, got {raw!r}")
    return int(raw)


def read_token_query(query: Mapping[str, str]) -> TokenQuery:
    raw = {k: v.strip() for k in TOKEN_FIELDS if (v := query.get(k)) is not None and v.strip() != ""}
    try:
        params, form = TokenParams(**raw), None
    except ValidationError as exc:
        params, form = TokenParams(), TokenForm.refused(raw, exc.errors())
    metric = query.get("metric") or None
    if metric is not None and metric not in METRICS:
        raise BadTokenView(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    # ?process=r1-zero, as on every walkthrough; an old link's ?path=r1_zero is read the same way
    # and redirected to the canonical URL by the page (its query differs from the state's)
    path = query.get(URL_KEY) or next((query[k] for k in OLD_URL_KEYS if query.get(k)), None)
    path = canonical_path_id(path) if path else None
    if path is not None and path not in PATH_IDS:
        raise BadTokenView(f"{URL_KEY} must be one of {', '.join(PATH_IDS)}, got {path!r}")
    overlay = query.get(OVERLAY_KEY) or None
    if overlay is not None and overlay != OVERLAY_ALL:
        raise BadTokenView(f"{OVERLAY_KEY} must be {OVERLAY_ALL!r} (the three paths together), got {overlay!r}")
    # an overlay without a path is dropped by query(): the page redirects to the URL without it
    return TokenQuery(params, form, metric, _index(query.get("completion"), "completion"),
                      _index(query.get("head"), "head"), path, overlay is not None)
