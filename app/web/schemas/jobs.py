"""The paths API's body (GET /api/walkthroughs/{id}/paths/{path}): a job's state, progress, run and result."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from app.stores.jobs import JobRecord
from app.web.schemas.base import Body


class JobProgress(Body):
    fraction: float = Field(description="Steps done over the run's total, 0 to 1; never decreases within a run "
                                        "(a takeover after a lost runner catches up before it moves on).")
    stage: str = Field(description="The stage running (\"queued\" before a runner claims the job, \"done\" after).")
    step: int = Field(description="The step within that stage.")
    done: int = Field(description="Steps done over the whole run.")
    total: int = Field(description="Steps of the whole run (0 until the runner has counted them).")


class JobRun(Body):
    id: str = Field(description="The job's id: a hash of kind, task, parameters and code version, the same "
                                "from every worker and replica.")
    computed_by: str | None = Field(description="The runner process holding or having finished the job: "
                                                "\"host:pid\"; null while queued.")
    attempts: int = Field(description="Claims of the job: 1 when it was computed once; more after a runner was "
                                      "lost mid-run and another took over.")
    started_at: float | None = Field(description="Unix time the current (or finishing) attempt started.")
    finished_at: float | None = Field(description="Unix time it finished (done or failed).")
    seconds: float | None = Field(description="The finishing attempt's run time.")


class PathJobBody(Body):
    """A training path as a job: 202 while queued or running, 200 once done or failed."""

    state: Literal["queued", "running", "done", "failed"]
    progress: JobProgress
    run: JobRun
    result: dict[str, Any] | None = Field(description="The run's curves, stage tables and samples once done; "
                                                      "null before (or when it failed).")
    error: str | None = Field(description="Why it failed (`POST` the same URL to start it again); null otherwise.")


def job_payload(job: JobRecord, result: dict[str, Any] | None) -> dict[str, Any]:
    return {"state": job.state,
            "progress": {"fraction": job.fraction, "stage": job.stage, "step": job.step, "done": job.done,
                         "total": job.total},
            "run": {"id": job.id, "computed_by": job.runner, "attempts": job.attempts, "started_at": job.started_at,
                    "finished_at": job.finished_at, "seconds": job.seconds},
            "result": result, "error": job.error}
