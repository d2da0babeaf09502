"""Every test starts from the same process-wide state, whatever ran before it on this worker.

The app keeps a few things per process, not per app: torch's thread count and its global RNG, the
compute LIMITER's slots and the job client JOBS (both set by every `create_app`, app/web/factory.py
configure_process), and the environment. A test that builds an app, seeds torch or sets a variable
would hand that to whichever test runs next, and that test's result would depend on the order
(issue 30: a checkpoint built in-process with the thread count an earlier app had left). So this
plugin (tests/conftest.py loads it) fixes one baseline per worker at the start of the session and
puts every piece of it back after each test. A test that needs a piece (a job store, a thread
count, a variable) sets it itself; `make test` runs the suite in random order on every core, so a
test that still leans on another's leftovers fails there, not only on a fresh machine.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from app.engine.jobs.client import JOBS
from app.engine.runtime.compute import LIMITER

# The app's own default (Settings.torch_threads): with one worker per core, more threads only contend.
BASELINE_THREADS = 1


@dataclass(frozen=True)
class ProcessState:
    threads: int
    rng: torch.Tensor
    default_dtype: torch.dtype
    environ: dict[str, str]
    limiter: tuple[Any, ...]
    jobs: tuple[Any, ...]

    @classmethod
    def now(cls) -> ProcessState:
        return cls(threads=torch.get_num_threads(), rng=torch.get_rng_state(),
                   default_dtype=torch.get_default_dtype(), environ=dict(os.environ),
                   limiter=(getattr(LIMITER, "slots", None), getattr(LIMITER, "max_waiting", None),
                            getattr(LIMITER, "timeout_s", None)),
                   jobs=(JOBS._store, dict(JOBS.tasks), JOBS.mode, JOBS._lease_s, JOBS._devices, JOBS.want_s))

    def restore(self) -> None:
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_rng_state(self.rng)
        torch.set_default_dtype(self.default_dtype)
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        slots, waiting, timeout_s = self.limiter
        if slots is not None and (LIMITER.slots, LIMITER.max_waiting, LIMITER.timeout_s) != self.limiter:
            LIMITER.configure(slots, waiting, timeout_s)
        store, tasks, mode, lease_s, devices, want_s = self.jobs
        if JOBS._store is not store or JOBS.mode != mode or JOBS.tasks != tasks or JOBS.want_s != want_s:
            if store is None:  # as a fresh process has it: no store, no runner threads
                JOBS.shutdown()
                JOBS._store, JOBS.tasks, JOBS.mode = None, {}, "off"
            else:
                JOBS.configure(store, tasks, mode, lease_s, devices, want_s)


_baseline: ProcessState | None = None


def pytest_sessionstart(session) -> None:
    global _baseline
    torch.set_num_threads(BASELINE_THREADS)
    torch.manual_seed(0)
    _baseline = ProcessState.now()


@pytest.fixture(autouse=True)
def _process_state_restored():
    """The baseline before each test (session fixtures, e.g. the browser tests' server, may have
    configured the job client since: their state is the baseline for the tests that use them)."""
    before = ProcessState.now()
    torch.set_rng_state(_baseline.rng)  # every test draws from the same global RNG state
    yield
    before.restore()
