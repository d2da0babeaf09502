"""What a kind registers for each kind of run it offers as a job (its paths): one JobTask, typed by its
parameters' model and its result (issue 51: a job is named in one place, `JobTask.job`)."""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict

from app.stores.jobs import JobSpec

# (stage, step in stage, steps done in the run, total steps of the run)
Progress = Callable[[str, int, int, int], None]
APP = Path(__file__).resolve().parents[2]
REPO = APP.parent
# What a result depends on: the domain's and engines' code and the checkpoints they load. Pages,
# templates and routes are left out: changing how a result is drawn does not recompute it.
COMPUTING = ("domain", "engine", "kinds/*/domain", "kinds/*/engine")


class JobParams(BaseModel):
    """A task's parameters: validated when a job is named, stored as their JSON (which, with the kind, the task
    and the code version, is the job's id: JobSpec.id), read back typed by whoever runs or reads it."""
    model_config = ConfigDict(frozen=True, extra="forbid")
    task: ClassVar[str]  # the name of the task these parameters are for

    def job(self) -> Job:
        """The job of these parameters: the one place a job's stored form (its key) is made."""
        return Job(self.task, self.model_dump(mode="json", by_alias=True))


P = TypeVar("P", bound=JobParams)
R = TypeVar("R")


class Job(NamedTuple):
    """One run, named: its task and its parameters as stored. Made only by `JobParams.job` (the one key function);
    what the job client takes (`jobs.find(job)`, `jobs.submit(job)`, `start_jobs(request, [job])`)."""
    task: str
    params: dict[str, Any]


@dataclass(frozen=True)
class JobTask(Generic[P, R]):
    """One kind of run a kind offers as a job: its typed parameters (P) and result (R)."""
    kind: str  # the id of the kind that offers it
    params: type[P]  # the parameters' model (its `task` is this task's name): a job's params are validated by it
    run: Callable[[P, Progress], R]
    types: tuple[type, ...]  # the dataclasses (and pydantic models) a result may hold: the codec's allow-list
    payload: Callable[[P, R], dict[str, Any]]  # the paths API's `result`
    title: Callable[[P], str]  # for listings: "r1-zero seed 3 (cpu)"
    # Runs of one lane queue behind each other; each lane has its own runner, so a path of half a
    # second never waits behind one of twenty.
    lane: str = "long"

    @property
    def name(self) -> str:  # unique in the app ("lm_path")
        return self.params.task

    def read(self, stored: Mapping[str, Any]) -> P:
        """Stored parameters, typed again (a ValidationError for params this task never made)."""
        return self.params.model_validate(dict(stored))

    def spec(self, stored: Mapping[str, Any]) -> JobSpec:
        typed = self.read(stored)
        return JobSpec(self.kind, self.name, typed.job().params, code_version(), f"{self.kind} {self.title(typed)}")

    def execute(self, stored: Mapping[str, Any], progress: Progress) -> R:
        return self.run(self.read(stored), progress)

    def answer(self, stored: Mapping[str, Any], result: R) -> dict[str, Any]:
        return self.payload(self.read(stored), result)


@functools.cache
def code_version() -> str:
    """sha256 over the computing code and the shipped checkpoints: deploying other code makes new jobs,
    and a runner claims only jobs of its own version (a web replica of version A never gets a result
    computed by version B's code)."""
    digest = hashlib.sha256()
    files = sorted({f for pattern in COMPUTING for f in APP.glob(f"{pattern}/**/*.py")}
                   | set((REPO / "walkthroughs" / "models").glob("*.safetensors")))
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def lanes(tasks: Mapping[str, JobTask]) -> dict[str, dict[str, JobTask]]:
    """The tasks grouped by lane: one runner per lane."""
    grouped: dict[str, dict[str, JobTask]] = {}
    for name, task in tasks.items():
        grouped.setdefault(task.lane, {})[name] = task
    return grouped
