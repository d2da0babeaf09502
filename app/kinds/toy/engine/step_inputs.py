"""Everything one toy page's numbers come from, obtained once before its screen is built: the
step's result (the walkthrough's GRPO step, or a training path's stage), every path's run when a
path is chosen (its panel compares their ends), and Compare mode's second side. The page asks
for this (web/pages.py), then the views build the screen from it: they never run or wait.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.engine.grpo.params import Conventions
from app.engine.jobs.client import JobClient
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.compare import Comparison, compare_step
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.process_jobs import process_run
from app.kinds.toy.engine.processes import ProcessRun
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.select import step_for_view
from app.kinds.toy.engine.step import TrainingDiverged


@dataclass(frozen=True)
class ToyInputs:
    result: StepResult | None  # None when the step diverged (run_error says how)
    run_error: str | None = None
    runs: Mapping[str, ProcessRun] = field(default_factory=dict)  # every path's run, with a path chosen
    comparison: Comparison | None = None  # Compare mode on the plain step
    compare_error: str | None = None


def obtain(params: GRPOParams, device: str, processes: ProcessCatalog | None, process_id: str | None = None,
           stage_id: str | None = None, compare: Conventions | None = None,
           jobs: JobClient | None = None) -> ToyInputs:
    """With a training path: its stage's last training step (seed and prompt apply; the stage keeps
    its own G, ε, β), and every path's run once (from the job store: computed by a runner if nobody
    has yet). Without: the walkthrough's GRPO step with all of `params`, and side B's step when
    `compare` is set. `jobs`: the app's job client, which a training path's runs are read with.
    KeyError for an unknown process or stage (callers validate ids first)."""
    runs: dict[str, ProcessRun] = {}
    if process_id is not None and processes is not None:
        assert jobs is not None, "a path's runs are read with the app's job client"
        runs = {pid: process_run(jobs, processes, pid, params.seed) for pid in processes.ids}
    result, run_error = None, None
    try:
        result = step_for_view(params, device, processes, process_id, stage_id, runs.get(process_id or ""))
    except TrainingDiverged as exc:
        run_error = str(exc)
    comparison, compare_error = None, None
    if compare is not None and not runs:  # Compare mode compares the walkthrough's own step
        try:
            comparison = compare_step(params, compare, device)
        except TrainingDiverged as exc:
            compare_error = str(exc)
    return ToyInputs(result, run_error, runs, comparison, compare_error)
