"""A recorded step's screen: the shared graph screen plus the group, the token window under its
overview strip, the checks against the framework's log, the diagnostics and the what-if.

Built from URL state (url_state.py) and the engine's recomputation, which the page obtains first
(web/pages.py, from engine/cache.py): this module computes nothing. The step
decides the strip's number (story.STEP_METRIC) unless the URL names another. The what-if's rows and
words are what_if_view.py's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from app.domain.snapshot import Snapshot
from app.engine.grpo.presets import PRESET_NAMES, PRESET_TITLES
from app.kinds.step_record.domain.opening import run_title
from app.kinds.step_record.domain.record import StepRecord
from app.kinds.step_record.engine.advantage_fit import TOLERANCE as ADVANTAGE_TOLERANCE
from app.kinds.step_record.engine.advantage_fit import AdvantageFit, advantage_fit, advantage_gap
from app.kinds.step_record.engine.checks import Check, Unchecked, checks, likely_causes, unchecked
from app.kinds.step_record.engine.params import record_conventions
from app.kinds.step_record.engine.step import Recomputed
from app.kinds.step_record.views import urls
from app.kinds.step_record.views.conventions_words import conventions_words
from app.kinds.step_record.views.diagnostics import Finding, diagnostics
from app.kinds.step_record.views.gradient_parts_view import kl_parts_chart, sign_change_chart
from app.kinds.step_record.views.node_view import NodeView, build_node_view
from app.kinds.step_record.views.story import STEP_METRIC, STORIES
from app.kinds.step_record.views.token_window import METRICS, Strip, Window, build_record_strip, build_record_window
from app.kinds.step_record.views.url_state import RecordQuery
from app.kinds.step_record.views.what_if_view import (
    AdvantageCause,
    CompareRow,
    ConventionChange,
    advantage_cause,
    compare_rows,
    convention_changes,
)
from app.views.charts.gradient_parts import PartsChart
from app.views.inspector import build_inspector
from app.views.meaning import node_meaning
from app.views.screen import Screen, build_graph
from app.views.tokens.metrics import visible
from app.views.tokens.window import WINDOW
from app.views.urls import URLS
from app.views.view_state import ViewState


class BadRecordPlace(LookupError):
    """A group, completion or token position the record does not have."""


@dataclass(frozen=True)
class GroupRow:
    index: int
    length: int
    truncated: bool
    rewards: tuple[float | None, ...]
    reward: float
    advantage: float
    advantage_from_rewards: float
    url: str
    current: bool
    preview: str  # the completion's first tokens, visible whitespace

    @property
    def diff(self) -> float:
        """|A − A from r|, in A's units."""
        return abs(self.advantage - self.advantage_from_rewards)

    @property
    def rel(self) -> float:
        return self.diff / abs(self.advantage) if self.advantage else (0.0 if self.diff == 0 else float("inf"))

    @property
    def matches(self) -> bool:
        return advantage_gap(self.advantage, self.advantage_from_rewards) <= ADVANTAGE_TOLERANCE


@dataclass(frozen=True)
class RecordView:
    record: StepRecord
    result: Recomputed
    other: Recomputed | None
    query: RecordQuery
    title: str
    conventions_line: str
    group: int
    group_links: tuple[tuple[int, str, bool], ...]
    rows: tuple[GroupRow, ...]
    prompt: str
    window: Window
    strip: Strip
    metric_links: tuple[tuple[str, str, str, bool], ...]
    checks: tuple[Check, ...]
    unchecked: tuple[Unchecked, ...]
    causes: tuple[str, ...]
    advantage_fit: AdvantageFit
    advantage_cause: AdvantageCause | None
    changes: tuple[ConventionChange, ...]
    findings: tuple[Finding, ...]
    compare: tuple[CompareRow, ...]
    presets: tuple[tuple[str, str], ...]
    form_action: str
    own_url: str
    api_url: str
    node: NodeView | None

    @property
    def kl_parts(self) -> PartsChart | None:
        """The KL step's ∂loss/∂log π in its surrogate and KL parts (gradient_parts_view.py)."""
        return kl_parts_chart(self.result, self.group, _tokens(self.record))

    @property
    def sign_parts(self) -> PartsChart | None:
        """The what-if's tokens whose push changes sign, each in its two parts, recorded and what-if."""
        return None if self.other is None else sign_change_chart(self.result, self.other, _tokens(self.record))

    @property
    def has_reference(self) -> bool:
        return all(c.ref_logprobs is not None for _, _, c in self.record.completions())

    @property
    def kl_note(self) -> str | None:
        """What the KL numbers are when the run has no KL penalty, or the record no reference."""
        beta = self.record.config.beta
        if not self.has_reference:
            note = ("The record holds no reference log-probs, so there is no KL to compute: every KL here is 0 and "
                    "nothing pulls the policy toward a reference.")
            if beta == 0:
                note = "This run has no KL penalty (β = 0). " + note
            if self.other is not None and self.other.conventions.beta > 0:
                note += " The what-if's β > 0 therefore adds nothing either."
            return note
        if beta == 0:
            return ("This run has no KL penalty (β = 0): the KL against the recorded reference is shown for "
                    "reading only; it does not enter the loss.")
        return None

    @property
    def checks_ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def zero_variance(self) -> bool:
        return len({r.reward for r in self.rows}) == 1

    @property
    def reward_functions(self) -> list[str]:
        return self.record.reward_functions


@dataclass(frozen=True)
class RecordScreen(Screen):
    rec: RecordView | None = None

    parts: ClassVar = {"focus": "step_record/focus.html", "form": "step_record/what_if_form.html",
                       "inspector": "step_record/node.html", "panels": "step_record/panels.html"}
    runnable: ClassVar[bool] = True
    stories: ClassVar = STORIES


def _tokens(record: StepRecord) -> list[list[str]]:
    return [c.tokens for _, _, c in record.completions()]


def check_place(record: StepRecord, q: RecordQuery) -> None:
    """The group, completion and token the URL names exist in the record, or BadRecordPlace."""
    if q.group >= len(record.groups):
        raise BadRecordPlace(f"the record has {len(record.groups)} group(s): no group {q.group}")
    group = record.groups[q.group]
    if q.completion >= len(group.completions):
        raise BadRecordPlace(f"group {q.group} has {len(group.completions)} completions: no completion {q.completion}")
    if q.at >= group.completions[q.completion].length:
        raise BadRecordPlace(f"completion {q.completion} has {group.completions[q.completion].length} tokens: "
                             f"no token {q.at + 1}")


def build_record_screen(snapshot: Snapshot, state: ViewState[RecordQuery], record: StepRecord, own: Recomputed,
                        other: Recomputed | None) -> RecordScreen:
    """The screen from the step recomputed under the record's own conventions (`own`) and, for the
    what-if, under the URL's (`other`, None without one): computed before, by the page."""
    q = state.own
    check_place(record, q)
    group = record.groups[q.group]
    metric = q.metric or ("change" if other is not None and state.step_id == "loss" else STEP_METRIC[state.step_id])
    if metric == "change" and other is None:
        metric = "grad"
    rows_of_group = [k for k, c in enumerate(own.completions) if c.group == q.group]
    row = rows_of_group[q.completion]
    tokens = _tokens(record)

    def url(**change) -> str:
        return state.with_own(**change).url(snapshot)

    def link(step: str, g: int, i: int, t: int) -> str:
        at_step = state.at_step(snapshot, step) if step != state.step_id else state
        return at_step.with_own(group=g, completion=i, at=t - t % WINDOW).url(snapshot) + "#record-tokens"

    entropy = {r: c.entropy for r, c in zip(rows_of_group, group.completions, strict=True)}
    window = build_record_window(own, row, tokens[row], q.at, metric, entropy, other,
                                 lambda s: url(at=s) + "#record-tokens")
    # the strip's 256 links carry only their query (the same page): a third of its bytes
    strip = build_record_strip(own, rows_of_group, metric, entropy, other, row,
                        lambda r, s: "?" + url(completion=own.completions[r].index, at=s).partition("?")[2]
                        + "#record-tokens")
    metric_ids = [m for m in METRICS if (m != "change" or other is not None)
                  and (m != "entropy" or group.completions[q.completion].entropy is not None)]
    own_checks = checks(record, own)
    rows = tuple(_group_row(record, own, other, k, q, url, tokens[k]) for k in rows_of_group)
    fit = advantage_fit(record, own, other)
    groups = tuple((g, url(group=g, completion=0, at=0), g == q.group) for g in range(len(record.groups)))
    inspector = build_inspector(snapshot, state.node, node_meaning(snapshot, state.node, own.conventions),
                                None, state.step_id) if state.node else None
    view = RecordView(
        record, own, other, q, run_title(record),
        conventions_words(record_conventions(record), record.config.token_normalizer), q.group,
        groups, rows, group.prompt, window, strip,
        tuple((m, METRICS[m].label, url(metric=m) + "#record-tokens", m == metric) for m in metric_ids),
        tuple(own_checks), tuple(unchecked(record, own)),
        tuple(likely_causes(record, [c for c in own_checks if not c.ok])),
        fit, advantage_cause(fit, own, other, url), convention_changes(own, other),
        tuple(diagnostics(record, own, link, tokens)), compare_rows(own, other),
        tuple((p, PRESET_TITLES[p]) for p in PRESET_NAMES), URLS.step(state.walkthrough_id, state.step_id),
        url(what_if=None), urls.record(state.walkthrough_id, {"group": str(q.group), "completion": str(q.completion)}),
        build_node_view(own, state.node, row, q.at) if state.node else None)
    return RecordScreen(snapshot, state, snapshot.step_index(state.step_id), build_graph(snapshot, state),
                        inspector, rec=view)


def _group_row(record: StepRecord, r: Recomputed, other: Recomputed | None, k: int, q: RecordQuery, url,
               tokens: list[str]) -> GroupRow:
    """A completion's row; A from r is the what-if's when there is one (its conventions recompute it)."""
    c = r.completions[k]
    done = record.groups[c.group].completions[c.index]
    preview = "".join(visible(t) for t in tokens[:24])
    return GroupRow(c.index, done.length, done.truncated, tuple(done.rewards[n] for n in record.reward_functions),
                    float(r.rewards[k]), float(r.advantages[k]), float((other or r).advantages_from_rewards[k]),
                    url(completion=c.index, at=0) + "#record-tokens", c.index == q.completion,
                    preview + ("…" if len(tokens) > 24 else ""))
