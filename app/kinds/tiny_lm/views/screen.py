"""The tiny-LM walkthrough's screen: the generic graph screen (views/screen.py) plus the token
panel, the token form, the selected node's recorded tensors and, inside a block, its attention.
Its part of the URL is read and written by views/url_state.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from app.domain.snapshot import Snapshot
from app.domain.training_paths import PATH_IDS
from app.engine.grpo.token_records import TensorSummary
from app.kinds.tiny_lm.engine.lm_plans import DR_GRPO
from app.kinds.tiny_lm.engine.params import TokenParams
from app.kinds.tiny_lm.engine.step_inputs import PathInputs, TokenInputs
from app.kinds.tiny_lm.engine.token_records import TokenStepResult
from app.kinds.tiny_lm.views import urls as lm_urls
from app.kinds.tiny_lm.views.dr_grpo_view import build_dr_grpo_view
from app.kinds.tiny_lm.views.lm_path_panel import PathPanel, build_path_panel
from app.kinds.tiny_lm.views.overlay_view import build_overlay
from app.kinds.tiny_lm.views.parts_view import kl_parts_chart
from app.kinds.tiny_lm.views.story import STORIES
from app.kinds.tiny_lm.views.token_form import TokenForm, token_query
from app.kinds.tiny_lm.views.token_steps import build_token_panel
from app.kinds.tiny_lm.views.update_view import UpdateView, build_update_view
from app.kinds.tiny_lm.views.url_state import OVERLAY_ALL, OVERLAY_KEY, BadTokenView, TokenQuery
from app.views.charts.gradient_parts import PartsChart
from app.views.inspector import build_inspector
from app.views.meaning import node_meaning
from app.views.screen import Screen, build_graph
from app.views.tokens.token_view import METRICS, TokenPanel
from app.views.view_state import ViewState

BLOCK = re.compile(r"(?:^|\.|@)policy\.blocks\.(\d+)(?:\.|#|$)")


@dataclass(frozen=True)
class AttentionView:
    block: int
    completion: int
    head: int
    heads: int
    tokens: tuple[str, ...]  # what each position read (the prompt, then the completion, less its last)
    weights: list[list[float]]  # row = query position, column = key position; rows sum to 1


@dataclass(frozen=True)
class TokenScreen:
    panel: TokenPanel
    form: TokenForm
    query: TokenQuery
    node: TensorSummary | None
    attention: AttentionView | None
    metric_urls: tuple[tuple[str, str, str], ...]  # (metric id, label, url)
    completion_urls: tuple[str, ...]  # the attention map of each completion
    head_urls: tuple[str, ...]  # … of each head
    api_url: str
    node_api_url: str | None
    paths: PathPanel | None = None
    update: UpdateView | None = None  # the update step's explanation

    @property
    def result(self) -> TokenStepResult:
        return self.panel.result

    @property
    def parts(self) -> PartsChart | None:
        """The KL step's ∂loss/∂log π in its surrogate and KL parts."""
        return kl_parts_chart(self.result) if self.panel.step_id == "kl" else None


def _attention(result: TokenStepResult, node_id: str | None, q: TokenQuery) -> AttentionView | None:
    match = BLOCK.search(node_id or "")
    if match is None:
        return None
    block = int(match.group(1))
    heads = result.nodes[f"softmax@policy.blocks.{block}.attention#0"].shape[1]
    if q.completion >= result.group_size:
        raise BadTokenView(f"completion must be below {result.group_size}, got {q.completion}")
    if q.head >= heads:
        raise BadTokenView(f"head must be below {heads}, got {q.head}")
    c = result.completions[q.completion]
    tokens = (*result.prompt_tokens, *(t.text for t in c.tokens))[:-1]
    return AttentionView(block, q.completion, q.head, heads, tokens, result.attention(block, q.completion, q.head))


@dataclass(frozen=True)
class TinyLMScreen(Screen):
    """The shared graph screen plus the token panel, form, paths and the node's recorded tensors."""
    token: TokenScreen | None = None

    leads_on: ClassVar = ("lm-path-panel", "training paths (R1-Zero, R1, distillation)")
    parts: ClassVar = {"focus": "tiny_lm/token_panel.html", "form": "tiny_lm/token_form.html",
                       "panels": "tiny_lm/panels.html", "inspector": "tiny_lm/token_node.html"}
    runnable: ClassVar[bool] = True
    stories: ClassVar = STORIES

    @property
    def form_refused(self) -> bool:
        return bool(self.token and self.token.form.errors)

    def defaults_url(self) -> str:
        """This step's saved view with default parameters."""
        return self.url(ViewState.for_step(self.snapshot, self.state.walkthrough_id, self.state.step_id,
                                           TokenQuery(TokenParams(), None, None, 0, 0)))


def build_token_screen(snapshot: Snapshot, state: ViewState[TokenQuery], inputs: TokenInputs) -> TinyLMScreen:
    """The screen from the page's finished results (`inputs`, engine/step_inputs.py)."""
    q = state.own
    result = inputs.result
    assert result is not None, "a step page obtains its step"
    panel = build_token_panel(result, state.step_id, q.metric)
    node = result.nodes.get(state.node) if state.node else None
    attention = _attention(result, state.node, q)
    inspector = build_inspector(snapshot, state.node, node_meaning(snapshot, state.node, q.params.conventions()),
                                None, state.step_id) if state.node else None

    def url(**change) -> str:
        return state.with_own(**change).url(snapshot)

    heads = attention.heads if attention else 0
    paths = path_panel(state.walkthrough_id, q, inputs.paths, {p: url(path=p, overlay=False) + "#lm-path-panel"
                                                               for p in PATH_IDS},
                       url(overlay=True) + "#lm-path-panel" if q.path else None)
    form = (q.form or TokenForm.from_params(q.params)).for_path(paths.title if q.path else None)
    token = TokenScreen(
        panel, form, q, node, attention,
        tuple((m.id, m.label, url(metric=m.id)) for m in METRICS.values()),
        tuple(url(completion=i) for i in range(result.group_size)) if attention else (),
        tuple(url(head=h) for h in range(heads)),
        tokens_api_url(state.walkthrough_id, state.step_id, q),
        tokens_api_url(state.walkthrough_id, state.step_id, q, state.node) if state.node else None,
        paths,
        build_update_view(result) if state.step_id == "update" else None)
    return TinyLMScreen(snapshot, state, snapshot.step_index(state.step_id), build_graph(snapshot, state),
                        inspector, token=token)


def path_panel(walkthrough_id: str, q: TokenQuery, runs: PathInputs | None, urls: dict[str, str],
               overlay_url: str | None = None) -> PathPanel:
    """The process selector, from the chosen path's jobs as the page found them (`runs`): for
    R1-Zero also the same run under Dr. GRPO's conventions, in overlay mode every path's."""
    if not q.path or runs is None:
        return build_path_panel(None, None, None, urls, None)
    box = {"seed": str(q.params.seed)}
    poll = lm_urls.lm_path(walkthrough_id, q.path, {**box, OVERLAY_KEY: OVERLAY_ALL} if q.overlay else box)
    retry = lm_urls.lm_path(walkthrough_id, q.path, box)
    main = runs.run
    missing = main.job is None or (q.overlay and any(r.job is None for r in runs.overlay.values()))
    if missing:  # nobody started (some of) them: the box offers Run, a POST to `retry`'s address
        start = lm_urls.lm_path(walkthrough_id, q.path, {**box, OVERLAY_KEY: OVERLAY_ALL} if q.overlay else box)
        return build_path_panel(q.path, None, None, urls, None, start_url=start, overlay_url=overlay_url)
    if q.overlay:
        overlay = build_overlay({p: r.job for p, r in runs.overlay.items() if r.job is not None},
                                {p: r.result for p, r in runs.overlay.items()}, urls)
        return build_path_panel(q.path, main.job, main.result, urls, poll, retry, overlay=overlay,
                                overlay_url=overlay_url, single_url=urls[q.path])
    dr = None
    if runs.dr_grpo is not None and runs.dr_grpo.job is not None and main.result is not None:
        dr = build_dr_grpo_view(main.result, runs.dr_grpo.job, runs.dr_grpo.result, poll,
                                lm_urls.lm_path(walkthrough_id, q.path, {**box, "compare": DR_GRPO.preset}))
    return build_path_panel(q.path, main.job, main.result, urls, poll, retry, dr=dr, overlay_url=overlay_url,
                            ahead=main.ahead)


def tokens_api_url(walkthrough_id: str, step_id: str, q: TokenQuery, node: str | None = None) -> str:
    query = {"step": step_id, **token_query(q.params)}
    if node:
        query["node"] = node
    return lm_urls.tokens(walkthrough_id, query)
