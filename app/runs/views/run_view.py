"""The run explorer's view model (issue 34): a run's findings, every logged metric as a chart, a zoom
window and one selected step's numbers. Pure Python: the page (web/run_pages.py) reads the query and
draws what this returns.

The first view is the whole run with the findings on top: a finding is a sentence with its numbers
and links to its steps; following one selects the step (every metric's value there, in a table) and
marks it on every chart. The zoom (`from`, `to`) draws the window at full resolution; with a step
selected, "Zoom to it" opens the window of ZOOM_SPAN steps around it. `smooth` (TensorBoard's EMA weight)
draws each metric's smoothed line over its raw one. A reward function's own curves (TRL's
`rewards/<name>/mean` and `/std`) are one titled group in their section, a function to a row.
"""
from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from app.runs.domain.length_reward import length_reward
from app.runs.domain.run_findings import Finding, findings
from app.runs.domain.run_log import RunLog
from app.runs.domain.run_series import window
from app.runs.domain.run_smoothing import MAX_WEIGHT, ema
from app.runs.views import urls
from app.runs.views.length_reward_chart import LengthRewardChart, length_reward_chart
from app.runs.views.run_charts import RunChart, cell, run_chart
from app.runs.views.run_domains import metric_domain
from app.runs.views.run_metrics import SECTIONS, metric_words
from app.views.urls import URLS

ZOOM_SPAN = 40  # steps each side of the selected one in "Zoom to it"


def _slug(title: str) -> str:
    """A section's anchor id ("Train/inference mismatch (per token)": train-inference-mismatch-per-token)."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


class BadRunQuery(ValueError):
    """A query the explorer refuses: `param` names the field (a 422 names it)."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(f"{param}: {message}")


@dataclass(frozen=True)
class RunQuery:
    first: int | None = None  # `from`
    last: int | None = None  # `to`
    step: int | None = None
    smooth: float = 0.0  # the EMA weight, 0 (raw) to MAX_WEIGHT


@dataclass(frozen=True)
class FindingView:
    rule: str
    sentence: str
    links: tuple[tuple[int, str], ...]  # (step, url)


@dataclass(frozen=True)
class RecordedStep:
    step: int
    walkthrough_url: str  # the record opened as its own walkthrough: every token's numbers, recomputed
    select_url: str  # this step selected in the explorer
    logged: bool  # the trainer logged metrics at this step


@dataclass(frozen=True)
class ChartGroup:
    title: str
    slug: str
    sentence: str
    charts: tuple[RunChart, ...]  # each function's mean, then its std


@dataclass(frozen=True)
class Section:
    title: str
    slug: str
    charts: tuple[RunChart, ...]
    groups: tuple[ChartGroup, ...] = ()


# TRL's per-function reward curves (grpo_trainer.py: f"rewards/{reward_func_name}/mean" and "/std"), and the
# per-sample readers' twins (samples/rewards/<name>/mean, /std)
REWARD_FUNC = re.compile(r"\A(?:samples/)?rewards/(?P<func>[^/]+)/(?P<stat>mean|std)\Z")
GROUP_WORDS = ("Each reward function's own mean and standard deviation over the step's completions, before "
               "weighting (TRL logs them as rewards/<name>/mean and /std), one row a function; the step's reward "
               "is their weighted sum.")


@dataclass(frozen=True)
class StepRow:
    name: str
    value: str  # "—" where the metric was not logged at this step
    sentence: str


@dataclass(frozen=True)
class SelectedStep:
    step: int
    asked: int  # the step the URL named; not `step` when that one was not logged (the nearest was taken)
    rows: tuple[StepRow, ...]
    previous_url: str | None
    next_url: str | None
    zoom_url: str
    record: RecordedStep | None  # this step's record, when one was recorded
    nearest_records: tuple[RecordedStep, ...]  # else the recorded steps either side


@dataclass(frozen=True)
class RunExplorer:
    run_id: str
    title: str
    facts: tuple[str, ...]
    findings: tuple[FindingView, ...]
    sections: tuple[Section, ...]
    x_range: tuple[int, int]
    zoomed: bool
    whole_url: str
    selected: SelectedStep | None
    api_url: str
    query: RunQuery
    recorded: tuple[RecordedStep, ...]
    derived: tuple[str, ...] = ()  # what the app computed from the run's files, not the trainer's log (DERIVED)
    only_derived: bool = False  # nothing here was logged: a run of per-token files alone (prime-rl, slime)
    length_reward: LengthRewardChart | None = None  # the steps in view's length against their reward, when logged
    smooth_max: float = MAX_WEIGHT


# metric prefix -> the files the app computed it from (engine/run_opening.py joins them to the log)
DERIVED = {"tokens/": "per-token files (prime-rl's token exports, slime's train dumps)",
           "samples/": "per-sample files (TRL's completions tables, verl's rollout dumps)"}


def nearest_step(steps: tuple[int, ...], asked: int) -> int:
    i = bisect.bisect_left(steps, asked)
    near = [s for s in steps[max(0, i - 1):i + 1]]
    return min(near, key=lambda s: (abs(s - asked), s))


def resolve(log: RunLog, q: RunQuery) -> tuple[tuple[int, int], int | None]:
    """(the window's first and last step, the selected logged step), or BadRunQuery naming the field."""
    if not log.steps:
        raise BadRunQuery("run", "the run logged no step")
    lo, hi = log.steps[0], log.steps[-1]
    first = lo if q.first is None else q.first
    last = hi if q.last is None else q.last
    if q.first is not None and q.last is not None and first > last:
        raise BadRunQuery("from", f"{first} is after to = {last}")
    if last < lo or first > hi or first > last:
        # name the bound that put the window outside the run: `to` when it is before the first logged step
        raise BadRunQuery("to" if q.last is not None and last < lo else "from",
                          f"the window {first}–{last} holds no logged step (the run logged steps {lo} to {hi})")
    selected = None if q.step is None else nearest_step(log.steps, q.step)
    return (max(first, lo), min(last, hi)), selected


def smooth_param(weight: float) -> str:
    return f"{weight:g}"


def _query(q: RunQuery, **changes: int | None) -> dict[str, int | str]:
    merged = {"from": q.first, "to": q.last, "step": q.step} | changes
    out: dict[str, int | str] = {k: v for k, v in merged.items() if v is not None}
    return out | ({"smooth": smooth_param(q.smooth)} if q.smooth else {})


def _func(chart: RunChart) -> tuple[str, str]:
    m = REWARD_FUNC.match(chart.key)
    return (m["func"], m["stat"]) if m else ("", "")


def _sections(by_section: dict[str, list[RunChart]]) -> tuple[Section, ...]:
    """Each section's charts, a reward function's own curves taken out into its group (by function, mean first)."""
    out = []
    for title, charts in by_section.items():
        funcs = [c for c in charts if REWARD_FUNC.match(c.key)]
        if len(funcs) < 2:  # one function's mean alone needs no group
            funcs = []
        rest = tuple(c for c in charts if c not in funcs)
        order = {f: i for i, f in enumerate(dict.fromkeys(_func(c)[0] for c in funcs))}  # as first logged
        funcs.sort(key=lambda c: (order[_func(c)[0]], _func(c)[1]))
        slug = _slug(title)
        group = ChartGroup("Per reward function", f"{slug}-per-function", GROUP_WORDS, tuple(funcs))
        groups = (group,) if funcs else ()
        if rest or groups:
            out.append(Section(title, slug, rest, groups))
    return tuple(out)


def explorer(run_id: str, log: RunLog, q: RunQuery, recorded: Mapping[int, str] | None = None) -> RunExplorer:
    """`recorded`: step -> walkthrough id of the run's recorded steps (its step records, each an upload)."""
    (first, last), selected = resolve(log, q)
    zoomed = (first, last) != (log.steps[0], log.steps[-1])

    def step_url(step: int) -> str:  # relative to the page itself: a 120-step run has thousands of dot links
        return "?" + urlencode(_query(q, step=step)) + "#selected-step"

    logged = set(log.steps)
    records = tuple(RecordedStep(step, URLS.walkthrough(wid), step_url(step), step in logged)
                    for step, wid in sorted((recorded or {}).items()))
    found = findings(log)
    marks: dict[str, list[tuple[int, str]]] = {}
    for f in found:
        for name in f.metrics:
            marks.setdefault(name, []).extend((s, f.rule) for s in f.steps)
    by_section: dict[str, list[RunChart]] = {s: [] for s in SECTIONS}
    for name in log.names:
        words = metric_words(name)
        points = window(log.series(name), first, last)
        if not points:
            continue
        series = log.series(name)
        smoothed = None
        if q.smooth:  # over the whole run: a zoom does not change a step's smoothed value
            smoothed = dict(zip((s for s, _ in series), ema([v for _, v in series], q.smooth), strict=True))
        by_section[words.section].append(run_chart(name, words.sentence, points, (first, last), step_url,
                                                   selected, marks.get(name, ()), [r.step for r in records],
                                                   metric_domain(name), smoothed))
    sections = _sections(by_section)
    derived = tuple(f"{prefix}… from {source}" for prefix, source in DERIVED.items()
                    if any(n.startswith(prefix) for n in log.names))
    only_derived = bool(log.names) and all(n.startswith(tuple(DERIVED)) for n in log.names)
    # the whole run's relation is the first view's, asked on every visit: once per log (a zoom's is computed per
    # request, so that a log does not keep one per window anyone asked for)
    lr = log.memo("length_reward", lambda: length_reward(log, first, last)) if not zoomed else \
        length_reward(log, first, last)
    return RunExplorer(
        run_id=run_id, title=f"A GRPO run: {len(log.steps)} {'' if only_derived else 'logged '}steps",
        facts=_facts(log), derived=derived, only_derived=only_derived,
        findings=tuple(_finding_view(f, step_url) for f in found), sections=sections,
        x_range=(first, last), zoomed=zoomed, whole_url=urls.run(run_id, _query(q, **{"from": None, "to": None})),
        selected=_selected(run_id, log, q, selected, records) if selected is not None else None,
        api_url=urls.run_api(run_id), query=q, recorded=records,
        length_reward=length_reward_chart(lr, step_url) if lr is not None else None)


def _facts(log: RunLog) -> tuple[str, ...]:
    facts = [f"steps {log.steps[0]} to {log.steps[-1]} ({len(log.steps)} logged"
             + (f", every {log.logging_steps}" if log.logging_steps else "") + ")",
             f"{len(log.metrics)} metrics"]
    runtime = log.summary.get("train_runtime")
    if runtime is not None and math.isfinite(runtime):
        facts.append(f"{runtime:,.0f} s of training")
    return tuple(facts)


def _finding_view(f: Finding, step_url) -> FindingView:
    return FindingView(f.rule, f.sentence, tuple((s, step_url(s)) for s in dict.fromkeys(f.steps)))


def _selected(run_id: str, log: RunLog, q: RunQuery, step: int, records: tuple[RecordedStep, ...]) -> SelectedStep:
    at = log.steps.index(step)
    rows = tuple(StepRow(name, cell(values[at]), metric_words(name).sentence) for name, values in log.metrics.items())

    def go(s: int) -> str:
        return urls.run(run_id, _query(q, step=s)) + "#selected-step"

    zoom: dict[str, int | str] = {"from": max(log.steps[0], step - ZOOM_SPAN),
                                  "to": min(log.steps[-1], step + ZOOM_SPAN), "step": step}
    zoom |= {"smooth": smooth_param(q.smooth)} if q.smooth else {}
    return SelectedStep(step=step, asked=q.step if q.step is not None else step, rows=rows,
                        previous_url=go(log.steps[at - 1]) if at > 0 else None,
                        next_url=go(log.steps[at + 1]) if at + 1 < len(log.steps) else None,
                        zoom_url=urls.run(run_id, zoom) + "#selected-step",
                        record=next((r for r in records if r.step == step), None),
                        nearest_records=_either_side(records, step))


def _either_side(records: tuple[RecordedStep, ...], step: int) -> tuple[RecordedStep, ...]:
    """The recorded steps just before and just after `step` (none when `step` is itself recorded)."""
    if any(r.step == step for r in records):
        return ()
    before = [r for r in records if r.step < step]
    after = [r for r in records if r.step > step]
    return tuple(([before[-1]] if before else []) + ([after[0]] if after else []))


__all__ = ["REWARD_FUNC", "ZOOM_SPAN", "BadRunQuery", "ChartGroup",
           "RecordedStep", "RunExplorer", "RunQuery", "explorer", "nearest_step", "resolve",
           "smooth_param"]
