"""The training-path panel of a screen: selector, pipeline, facts, curves, comparison.

Built from the engine's runs (docs/design.md §4); every chart is finished here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.domain.snapshot import Snapshot
from app.domain.training_paths import PathChoice
from app.kinds.toy.domain.process_spec import Process, ProcessCatalog, Stage
from app.kinds.toy.domain.rewards import COMPONENTS, role_rewards
from app.kinds.toy.domain.toy_task import ROLE_LABELS
from app.kinds.toy.engine.processes import METRICS_NOTE, ProcessRun, StageRun
from app.kinds.toy.views.charts.comparison import ComparisonChart, comparison
from app.kinds.toy.views.charts.pipeline import Pipeline, kind_label, pipeline
from app.kinds.toy.views.charts.stage_curves import stage_curves
from app.kinds.toy.views.url_state import ToyState
from app.views.charts.line_charts import LineChart
from app.views.numbers import significant
from app.views.view_state import ViewState

NO_PROCESS_TITLE = "GRPO walkthrough step (no training path)"


@dataclass(frozen=True)
class StageLink:
    stage: Stage
    kind_label: str
    url: str
    selected: bool


@dataclass(frozen=True)
class StageCard:
    stage: Stage
    kind_label: str
    dataset_size: int
    sampled: int
    iterations: int  # training iterations drawn in the curves (0: the stage does not train)
    reward_rows: tuple[tuple[str, str], ...]  # (answer role, reward) of the stage's rule
    curves: tuple[LineChart, ...]
    sampling_note: str
    reward_why: str = ""  # why a right answer earns less than a wrong one under this rule, if it does


@dataclass(frozen=True)
class Comparison:
    seed: int
    metrics_note: str
    chart: ComparisonChart
    paper_results: tuple[tuple[str, str], ...]  # (path title, the paper's result)


@dataclass(frozen=True)
class ProcessPanel:
    options: list[PathChoice]
    process: Process | None
    pipeline: Pipeline | None
    stage_links: tuple[StageLink, ...]
    stage: StageCard | None
    comparison: Comparison | None  # only with a path chosen: it runs all three paths
    form_action: str
    hidden: dict[str, str]

    @property
    def stage_urls(self) -> dict[str, str]:
        return {link.stage.id: link.url for link in self.stage_links}


def reward_rows(stage: Stage) -> tuple[tuple[str, str], ...]:
    """(answer role, reward) rows of the stage's reward rule, in the roles' fixed order."""
    if not stage.reward:
        return ()
    by_role = role_rewards(stage.reward)
    return tuple((ROLE_LABELS.get(r, r), significant(v, strip=True)) for r, v in by_role.items())


RIGHT = ("correct", "mixed", "unformatted")  # the roles whose final answer is right


def _parts(role: str, components: tuple[str, ...]) -> str:
    paid = [f"{c} {significant(COMPONENTS[c][role], strip=True)}" for c in components]
    return ", ".join(paid)


def reward_why(stage: Stage) -> str:
    """A sentence for every right answer the rule pays less than the wrong one: which components
    pay what, and why a rule-based reward does that."""
    if not stage.reward:
        return ""
    by_role = role_rewards(stage.reward)
    wrong = by_role["wrong"]
    below = [r for r in RIGHT if by_role[r] < wrong]
    if not below:
        return ""
    said = "; ".join(f"{ROLE_LABELS[r]} {significant(by_role[r], strip=True)} ({_parts(r, stage.reward)})"
                     for r in below)
    return (f"A right answer can earn less than a wrong one here: {said}, against wrong "
            f"{significant(wrong, strip=True)} ({_parts('wrong', stage.reward)}). The rule pays only what it "
            "can check: an answer that ignores the template cannot be parsed, so accuracy pays it 0 however right "
            "it is, while a wrong answer that keeps the template still earns its format points, as R1's "
            "rule-based rewards do.")


def sampling_note(run: StageRun) -> str:
    st = run.stage
    per = st.samples_per_prompt if st.kind == "rejection_sampling" else None
    how = f"samples {per} answers per prompt" if per else f"samples {run.sampled} answers"
    return (f"No training: this stage {how} from {st.start} and keeps "
            f"{len(run.dataset)} of {run.sampled} (those every reward component pays).")


def stage_card(run: StageRun) -> StageCard:
    st = run.stage
    return StageCard(st, kind_label(st.kind), len(run.dataset), run.sampled, len(run.curve), reward_rows(st),
                     tuple(stage_curves(run)), sampling_note(run), reward_why(st))


def build_process_panel(snapshot: Snapshot, state: ViewState[ToyState], processes: ProcessCatalog,
                        runs: Mapping[str, ProcessRun]) -> ProcessPanel:
    """`runs`: every path's run, obtained by the page when a path is chosen (engine/step_inputs.py)."""
    seed = state.own.params.seed
    options = [PathChoice("", NO_PROCESS_TITLE, 
                               state.with_own(process=None, stage=None).url(snapshot), state.own.process is None)]
    options += [PathChoice(p.id, p.title, 
                               state.with_own(process=p.id, stage=None).url(snapshot), p.id == state.own.process)
                for p in processes.processes]
    process = drawn = card = compared = None
    links: tuple[StageLink, ...] = ()
    if state.own.process:
        process = processes.get(state.own.process)
        run = runs[process.id]
        shown = process.stage(state.own.stage) if state.own.stage else process.default_stage
        drawn = pipeline(process, shown.id)
        # the default stage's link names no stage: one URL per view
        links = tuple(StageLink(s, kind_label(s.kind),
                                state.with_own(process=process.id, stage=None if s is process.default_stage else s.id)
                                .url(snapshot), s.id == shown.id)
                      for s in process.stages)
        card = stage_card(run.stage(shown.id))
        # The plain walkthrough step should not pay for three training runs: only with a path chosen.
        finals = [(processes.get(pid), runs[pid].final) for pid in processes.ids]
        compared = Comparison(seed, METRICS_NOTE, comparison(finals),
                              tuple((p.title, p.paper_result) for p, _ in finals))
    hidden = {k: v for k, v in state.query(snapshot).items() if k not in ("process", "stage")}
    form_action = state.url(snapshot).split("?", 1)[0]
    return ProcessPanel(options, process, drawn, links, card, compared, form_action, hidden)
