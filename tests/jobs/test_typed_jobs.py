"""Every computation the app keeps as a job is typed (issue 51): `JobTask[Params, Result]`, whose parameters are a
frozen pydantic model (`JobParams`), and a job is named in one place, `JobParams.job()`: the stored form, hence
the key (JobSpec.id hashes it with the kind, the task and the code version).

- every kind's task has its own parameters' model, named after the task;
- a job read back from the store is the same parameters, typed (the runner, the payload and the title get the
  model, never a dict);
- parameters a task never made are refused before anything is stored;
- two spellings of one run are one job;
- nothing in app/ makes a Job any other way.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.engine.jobs.tasks import Job, JobParams
from app.house import KINDS, registry
from app.kinds.smollm.engine import step_task
from app.kinds.smollm.engine.params import SmolParams
from app.kinds.tiny_lm.engine import path_tasks
from app.kinds.toy.domain.process_spec import load_processes
from app.kinds.toy.engine import process_jobs
from app.web.settings import Settings

APP = Path(__file__).resolve().parents[2] / "app"


def test_every_task_has_its_own_parameters_model():
    tasks = registry(KINDS).tasks
    assert set(tasks) == {"toy_process", "lm_path", "smollm_step", "smollm_path"}
    for name, task in tasks.items():
        assert issubclass(task.params, JobParams) and task.params.task == name == task.name
        assert task.params.model_config.get("frozen") and task.params.model_config.get("extra") == "forbid"


def jobs() -> list[Job]:
    catalog = load_processes(Settings().processes_file)
    return [process_jobs.process_job(catalog, "r1", 3, 2), path_tasks.path_job("r1-zero", 3, "cpu", 0.5),
            step_task.step_job(SmolParams(group_size=3, max_new_tokens=8), "cpu")]


@pytest.mark.parametrize("job", jobs(), ids=lambda j: j.task)
def test_a_stored_job_reads_back_as_the_same_typed_parameters(job):
    task = registry(KINDS).tasks[job.task]
    typed = task.read(job.params)
    assert isinstance(typed, task.params) and typed.job() == job
    spec = task.spec(job.params)
    assert spec.params == job.params and spec.task == job.task and spec.title.startswith(task.kind)


@pytest.mark.parametrize("job", jobs(), ids=lambda j: j.task)
def test_parameters_the_task_never_made_are_refused(job):
    task = registry(KINDS).tasks[job.task]
    with pytest.raises(ValidationError):
        task.spec({**job.params, "typo": 1})
    with pytest.raises(ValidationError):
        task.spec({k: v for k, v in job.params.items() if k not in ("seed", "step")})


def test_two_spellings_of_one_run_are_one_job():
    assert step_task.step_job(SmolParams(), "cpu") == step_task.step_job(SmolParams(seed=SmolParams().seed), "cpu")
    assert path_tasks.path_job("r1", 3, "cpu") == path_tasks.path_job("r1", 3.0, "cpu", 1)  # type: ignore[arg-type]


def test_a_job_is_made_in_one_place():
    made = []
    for path in APP.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(?<![\w.])Job\(", line) and not line.lstrip().startswith("class "):
                made.append(f"{path.relative_to(APP)}:{n}")
    assert made == ["engine/jobs/tasks.py:" + str(_line_of_job_call())]


def _line_of_job_call() -> int:
    lines = (APP / "engine" / "jobs" / "tasks.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1)
                if re.search(r"(?<![\w.])Job\(", line) and not line.lstrip().startswith("class "))
