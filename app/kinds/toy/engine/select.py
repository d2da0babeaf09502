"""The one place that picks what a view's numbers come from: a process stage or the plain step."""
from __future__ import annotations

from app.engine.jobs.client import JobClient
from app.kinds.toy.domain.process_spec import ProcessCatalog
from app.kinds.toy.engine.params import GRPOParams
from app.kinds.toy.engine.process_jobs import process_run
from app.kinds.toy.engine.processes import ProcessRun
from app.kinds.toy.engine.records import StepResult
from app.kinds.toy.engine.stage_step import stage_step
from app.kinds.toy.engine.step import run_grpo_step


def step_for_view(params: GRPOParams, device: str, processes: ProcessCatalog | None,
                  process_id: str | None = None, stage_id: str | None = None,
                  run: ProcessRun | None = None, jobs: JobClient | None = None) -> StepResult:
    """With a training path: its stage's last training step (seed and prompt apply; the stage
    keeps its own G, ε, β), from `run` when the caller has the path's run already. Without: the
    walkthrough's GRPO step with all of `params`. `jobs`: the app's job client, to read the path's run
    when `run` is not given. KeyError for an unknown process or stage
    (callers validate ids first)."""
    if process_id is None or processes is None:
        return run_grpo_step(params, device)
    process = processes.get(process_id)
    stage = process.stage(stage_id) if stage_id is not None else process.default_stage
    if run is None:
        assert jobs is not None, "a path's run is read with the app's job client"
        run = process_run(jobs, processes, process.id, params.seed)
    return stage_step(run, stage.id, params.prompt)
