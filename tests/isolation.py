"""Every test starts from the same process-wide state, whatever ran before it on this worker.

What an app keeps is its own (app/web/context.py: its job client, compute limiter, words for nodes,
templates), so two apps of one process share none of it and a test's app leaves nothing to the next.
What stays per process is put back here: torch's thread count, its default dtype and its global RNG,
the environment, and the runner threads a test's job clients started (threads are the process's: a
client nobody reads any more would otherwise keep polling its store). A test that seeds torch or sets
a variable would hand that to whichever test runs next, and that test's result would depend on the
order (issue 30: a checkpoint built in-process with the thread count an earlier app had left). So this
plugin (tests/conftest.py loads it) fixes one baseline per worker at the start of the session and
puts every piece of it back after each test. `make test` runs the suite in random order on every
core, so a test that still leans on another's leftovers fails there, not only on a fresh machine.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch

from app.engine.jobs.client import JobClient, running_clients

# The app's own default (Settings.torch_threads): with one worker per core, more threads only contend.
BASELINE_THREADS = 1


@dataclass(frozen=True)
class ProcessState:
    threads: int
    rng: torch.Tensor
    default_dtype: torch.dtype
    environ: dict[str, str]
    runners: frozenset[JobClient]  # the clients whose runner threads run (a session fixture's server's)

    @classmethod
    def now(cls) -> ProcessState:
        return cls(threads=torch.get_num_threads(), rng=torch.get_rng_state(),
                   default_dtype=torch.get_default_dtype(), environ=dict(os.environ),
                   runners=frozenset(running_clients()))

    def restore(self) -> None:
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.set_rng_state(self.rng)
        torch.set_default_dtype(self.default_dtype)
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        for client in running_clients():
            if client not in self.runners:  # started by the test's apps: stopped with the test
                client.shutdown()


_baseline: ProcessState | None = None


def pytest_sessionstart(session) -> None:
    global _baseline
    torch.set_num_threads(BASELINE_THREADS)
    torch.manual_seed(0)
    _baseline = ProcessState.now()


@pytest.fixture(autouse=True)
def _process_state_restored():
    """The baseline before each test (session fixtures, e.g. the browser tests' server, may have
    started runner threads since: they keep running for the tests that use them)."""
    before = ProcessState.now()
    torch.set_rng_state(_baseline.rng)  # every test draws from the same global RNG state
    yield
    before.restore()
