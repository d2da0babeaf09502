"""The training-path panel of a screen: selector, pipeline, facts, curves, comparison."""
from __future__ import annotations

from dataclasses import dataclass

from .engine.processes import run_process
from .process_payloads import comparison_payload, process_run_payload
from .process_spec import ProcessCatalog

NO_PROCESS_TITLE = "GRPO walkthrough step (no training path)"


@dataclass(frozen=True)
class ProcessOption:
    id: str
    title: str
    url: str
    selected: bool


@dataclass(frozen=True)
class ProcessPanel:
    options: list[ProcessOption]
    process: dict | None
    stage: dict | None
    stage_urls: dict[str, str]
    comparison: dict | None  # only with a path chosen: it runs all three paths
    form_action: str
    hidden: dict[str, str]


def build_process_panel(screen, processes: ProcessCatalog) -> ProcessPanel:
    state, snapshot = screen.state, screen.snapshot
    seed = state.params.seed
    options = [ProcessOption("", NO_PROCESS_TITLE, screen.url(state.with_process(None)), state.process is None)]
    options += [ProcessOption(p.id, p.title, screen.url(state.with_process(p.id)), p.id == state.process)
                for p in processes.processes]
    process = stage = None
    stage_urls: dict[str, str] = {}
    if state.process:
        process = process_run_payload(processes, run_process(processes, state.process, seed))
        stage_id = state.stage or process["stages"][-1]["id"]
        stage = next(s for s in process["stages"] if s["id"] == stage_id)
        last = process["stages"][-1]["id"]
        stage_urls = {s["id"]: screen.url(state.with_process(state.process, None if s["id"] == last else s["id"]))
                      for s in process["stages"]}
    comparison = None
    if state.process:  # the plain walkthrough step should not pay for three training runs
        comparison = comparison_payload(processes, [run_process(processes, pid, seed) for pid in processes.ids])
    hidden = {k: v for k, v in state.query(snapshot).items() if k not in ("process", "stage")}
    return ProcessPanel(options, process, stage, stage_urls, comparison, screen.path(), hidden)
