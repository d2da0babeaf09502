"""Runs compared (issue 50): what differs in their configs, every metric they share overlaid on one x axis, the
metrics only some have named, and their findings side by side. Pure Python: web/run_compare_pages.py reads the
query (views/run_compare_query.py) and the runs, the template draws what this returns.

Each run is a letter (A, B, …) and an index: its colour, dash and marker shape (views/run_compare_chart.py), the same
in the legend, every chart, the config table and the findings. The legend names what differs in each run's config
(β, ε, loss_type…): a line is read as "the β = 0.1 run", not as a hash.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from app.runs.domain.run_config import MISSING, ConfigDiff, RunConfig, diff, shown
from app.runs.domain.run_findings import Finding, findings
from app.runs.domain.run_log import RunLog
from app.runs.views import urls
from app.runs.views.run_charts import slug
from app.runs.views.run_compare_cache import memo
from app.runs.views.run_compare_chart import SHAPES, OverlayChart, XPoint, m4, overlay_chart, shape_path
from app.runs.views.run_compare_query import CompareQuery
from app.runs.views.run_domains import metric_domain
from app.runs.views.run_metrics import SECTIONS, metric_words
from app.runs.views.run_view import BadRunQuery

TOKENS = "num_tokens"  # TRL's tokens seen so far (prompts and completions), logged at every step
LETTERS = "ABCDEFGH"
LEGEND_KEYS = 3  # differing config keys named in each run's legend entry
ABSENT_WHY = {"kl": " (TRL logs kl only when β > 0)"}
SHORT = {"beta": "β", "epsilon": "ε", "epsilon_high": "ε_high", "learning_rate": "lr"}  # TRL's names, as papers write


@dataclass(frozen=True)
class CompareRun:
    index: int
    label: str  # "A"
    id: str
    url: str  # its explorer
    steps: str  # "steps 1 to 120 (120 logged)"
    has_tokens: bool
    config_source: str
    differs: str  # "β 0.04 · loss_type dapo": what sets it apart, for the legend
    shape: str  # the marker's SVG path in a 12 × 12 box, for the legend swatch


@dataclass(frozen=True)
class ConfigTableRow:
    key: str
    values: tuple[str, ...]  # one per run, as written


@dataclass(frozen=True)
class ConfigView:
    differ: tuple[ConfigTableRow, ...]
    same: tuple[ConfigTableRow, ...]  # one value each (values[0])
    partial: tuple[ConfigTableRow, ...]


@dataclass(frozen=True)
class FindingCell:
    index: int
    label: str
    sentences: tuple[tuple[str, tuple[tuple[int, str], ...]], ...]  # (sentence, ((step, url), …)); () if silent


@dataclass(frozen=True)
class FindingRow:
    rule: str
    cells: tuple[FindingCell, ...]


@dataclass(frozen=True)
class CompareSection:
    title: str
    slug: str
    charts: tuple[OverlayChart, ...]


@dataclass(frozen=True)
class OnlyIn:
    runs: str  # "run B" / "runs A and C"
    names: tuple[str, ...]
    labels: tuple[str, ...] = ()  # ("A", "C")
    charted: bool = False  # two or more runs have them: charted above, for those runs


@dataclass(frozen=True)
class RunCompare:
    title: str
    runs: tuple[CompareRun, ...]
    x: str  # "step" | "tokens"
    sources: tuple[tuple[str, str], ...]  # ("Runs A and C", where their configs came from), runs with one source as one
    x_urls: tuple[tuple[str, str, bool], ...]  # (axis, url, current): the step/tokens switch
    x_note: str  # what the tokens axis leaves out ("" on steps)
    config: ConfigView
    sections: tuple[CompareSection, ...]
    only_in: tuple[OnlyIn, ...]
    findings: tuple[FindingRow, ...]
    api_url: str


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def compare_url(ids: Sequence[str], x: str = "step", api: bool = False) -> str:
    query = [("run", i) for i in ids] + ([("x", x)] if x != "step" else [])
    return ("/api" if api else "") + "/runs/compare?" + urlencode(query)


def _name(key: str) -> str:
    return SHORT.get(key, key)


def _runs_words(labels: Sequence[str]) -> str:
    if len(labels) == 1:
        return f"run {labels[0]}"
    return f"runs {', '.join(labels[:-1])} and {labels[-1]}"


def _cap(words: str) -> str:
    return words[:1].upper() + words[1:]


def cut(log: RunLog, name: str, x: str) -> tuple[list[XPoint], int]:
    """The metric's (x, value) points cut for drawing (M4), and how many were logged; once per log (its memo)."""
    def build() -> tuple[list[XPoint], int]:
        points: list[XPoint] = list(log.series(name))
        if x == "tokens":
            tokens = tokens_seen(log)
            points = sorted((tokens[int(s)], v) for s, v in points if s in tokens)
        return m4(points), len(points)

    return memo(log, ("cut", name, x), build)


def tokens_seen(log: RunLog) -> dict[int, float]:
    """step -> TRL's num_tokens there."""
    return memo(log, TOKENS, lambda: dict(log.series(TOKENS)))


def run_findings(log: RunLog) -> list[Finding]:
    return memo(log, "findings", lambda: findings(log))


def _config_view(d: ConfigDiff) -> ConfigView:
    def rows(found) -> tuple[ConfigTableRow, ...]:
        return tuple(ConfigTableRow(r.key, tuple(shown(v) for v in r.values)) for r in found)

    same = tuple(ConfigTableRow(r.key, (shown(r.values[0]),)) for r in d.same)
    return ConfigView(rows(d.differ), same, rows(d.partial))


def _finding_rows(runs: Sequence[tuple[str, RunLog]], labels: Sequence[str]) -> tuple[FindingRow, ...]:
    per_run = [run_findings(log) for _, log in runs]
    rules = list(dict.fromkeys(f.rule for found in per_run for f in found))
    out = []
    for rule in rules:
        cells = []
        for i, ((ident, _), found) in enumerate(zip(runs, per_run, strict=True)):
            said = tuple((f.sentence, tuple((s, urls.run(ident, {"step": s}) + "#selected-step")
                                            for s in dict.fromkeys(f.steps))) for f in found if f.rule == rule)
            cells.append(FindingCell(i, labels[i], said))
        out.append(FindingRow(rule, tuple(cells)))
    return tuple(out)


def compare(runs: Sequence[tuple[str, RunLog]], configs: Sequence[RunConfig], q: CompareQuery) -> RunCompare:
    """`runs`: (id, log) in the query's order; `configs`: each run's config (RunConfig({}) where none was found)."""
    labels = LETTERS[:len(runs)]
    d = diff(configs)
    has_tokens = [TOKENS in log.metrics for _, log in runs]
    on_tokens = q.x == "tokens"
    drawn = [i for i in range(len(runs)) if not on_tokens or has_tokens[i]]  # the runs on the charts
    x_note = ""
    if on_tokens and not any(has_tokens):
        raise BadRunQuery("x", f"none of these runs logged {TOKENS} (TRL's tokens seen): compare them on x=step")
    if on_tokens:
        lacking = [labels[i] for i in range(len(runs)) if not has_tokens[i]]
        if lacking:
            x_note = (f"{_cap(_runs_words(lacking))} logged no {TOKENS} (TRL's tokens seen): not drawn against "
                      "tokens. Switch to steps to see every run.")
    compare_runs = []
    for i, (ident, log) in enumerate(runs):
        known = [r for r in d.differ if r.values[i] is not MISSING]
        differs = (" · ".join(f"{_name(r.key)} {shown(r.values[i])}" for r in known[:LEGEND_KEYS])
                   or ("(no config found)" if not configs[i].values else ""))
        compare_runs.append(CompareRun(
            i, labels[i], ident, urls.run(ident), f"steps {log.steps[0]} to {log.steps[-1]} ({len(log.steps)} logged)"
            if log.steps else "no logged step", has_tokens[i], configs[i].source, differs,
            shape_path(SHAPES[i % len(SHAPES)], 6, 6, 4)))

    names = [set(log.names) for _, log in runs]
    # a metric two or more runs logged is charted for them (TRL logs kl only when β > 0: comparing β = 0 with β > 0
    # must still show the KL of the runs that have one); the runs without it are said under its chart
    shared = [n for n in dict.fromkeys(n for _, log in runs for n in log.names)
              if sum(n in s for s in names) >= min(2, len(runs))]
    by_section: dict[str, list[OverlayChart]] = {s: [] for s in SECTIONS}
    x_word = "tokens" if on_tokens else "step"
    xs: list[float] = []
    for i in drawn:
        log = runs[i][1]
        if not log.steps:
            continue
        if on_tokens:
            t = tokens_seen(log)
            if t:
                xs += [min(t.values()), max(t.values())]
        else:
            xs += [log.steps[0], log.steps[-1]]
    x_range = (min(xs), max(xs)) if xs else (0.0, 1.0)
    for name in shared:
        if on_tokens and name == TOKENS:
            continue  # tokens against tokens says nothing
        words = metric_words(name)
        lines = [(i, labels[i], *cut(runs[i][1], name, q.x)) for i in drawn if name in names[i]]
        if not lines:
            continue
        chart = overlay_chart(name, slug(name), words.sentence, lines, x_range, x_word, metric_domain(name))
        lacking = [labels[i] for i in range(len(runs)) if name not in names[i]]
        if lacking:
            chart = dataclasses.replace(chart, absent=f"Not logged by {_runs_words(lacking)}"
                                        + (ABSENT_WHY.get(name, "") + "." if name in ABSENT_WHY else "."))
        by_section[words.section].append(chart)
    sections = tuple(CompareSection(t, _slug(t), tuple(c)) for t, c in by_section.items() if c)
    groups: dict[tuple[int, ...], list[str]] = {}
    for name in dict.fromkeys(n for _, log in runs for n in log.names):
        having = tuple(i for i, s in enumerate(names) if name in s)
        if len(having) < len(runs):
            groups.setdefault(having, []).append(name)
    only_in = tuple(OnlyIn(_runs_words([labels[i] for i in having]), tuple(group), tuple(labels[i] for i in having),
                           len(having) >= 2) for having, group in sorted(groups.items()))
    ids = [i for i, _ in runs]
    by_source: dict[str, list[str]] = {}
    for r in compare_runs:
        by_source.setdefault(r.config_source, []).append(r.label)
    sources = tuple((_cap(_runs_words(group)), source) for source, group in by_source.items())
    return RunCompare(
        title=f"{len(runs)} runs compared", runs=tuple(compare_runs), x=q.x, sources=sources,
        x_urls=tuple((axis, compare_url(ids, axis), axis == q.x) for axis in ("step", "tokens")), x_note=x_note,
        config=_config_view(d), sections=sections, only_in=only_in, findings=_finding_rows(runs, labels),
        api_url=compare_url(ids, q.x, api=True))


__all__ = ["LETTERS", "TOKENS", "CompareRun", "CompareSection", "ConfigView", "FindingRow", "OnlyIn", "RunCompare",
           "compare", "compare_url", "cut", "run_findings"]
