"""What a kind registers for each kind of run it offers as a job (its paths): one JobTask."""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.stores.jobs import JobSpec

# (stage, step in stage, steps done in the run, total steps of the run)
Progress = Callable[[str, int, int, int], None]
APP = Path(__file__).resolve().parents[2]
REPO = APP.parent
# What a result depends on: the domain's and engines' code and the checkpoints they load. Pages,
# templates and routes are left out: changing how a result is drawn does not recompute it.
COMPUTING = ("domain", "engine", "kinds/*/domain", "kinds/*/engine")


@dataclass(frozen=True)
class JobTask:
    kind: str  # the id of the kind that offers it
    name: str  # unique in the app ("lm_path")
    run: Callable[[Mapping[str, Any], Progress], Any]  # params (as stored, JSON) -> result
    types: tuple[type, ...]  # the dataclasses (and pydantic models) a result may hold: the codec's allow-list
    payload: Callable[[Mapping[str, Any], Any], dict[str, Any]]  # (params, result) -> the paths API's `result`
    title: Callable[[Mapping[str, Any]], str]  # for listings: "r1-zero seed 3 (cpu)"
    # Runs of one lane queue behind each other; each lane has its own runner, so a path of half a
    # second never waits behind one of twenty.
    lane: str = "long"

    def spec(self, params: Mapping[str, Any]) -> JobSpec:
        return JobSpec(self.kind, self.name, dict(params), code_version(), f"{self.kind} {self.title(params)}")


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
