"""Test tasks for the job machinery (tests/jobs/): a JobTask needs a parameters' model (app/engine/jobs/tasks.py),
and a test's task takes whatever small dict the test stores. `task("t", run)` makes one named "t" whose params
are those keys, read as attributes or, as the tests were written, by key."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict

from app.engine.jobs.tasks import Job, JobParams, JobTask


class AnyParams(JobParams):
    """Any keys a test stores (the app's own tasks name every field)."""
    model_config = ConfigDict(frozen=True, extra="allow")

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


def params_named(name: str) -> type[AnyParams]:
    return type(f"Params_{name}", (AnyParams,), {"task": name, "__module__": __name__})


def task(name: str, run: Callable[[Any, Any], Any] = lambda params, progress: None, types: tuple[type, ...] = (),
         payload: Callable[[Any, Any], dict] = lambda params, result: {}, title: Callable[[Any], str] | None = None,
         lane: str = "long") -> JobTask:
    return JobTask("k", params_named(name), run, types, payload, title or (lambda params: name), lane=lane)


def job(name: str, **params: Any) -> Job:
    """A job of the test task `name` with these parameters."""
    return params_named(name)(**params).job()
