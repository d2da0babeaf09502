"""How many torch intra-op threads the real model's jobs run on: `SMOLLM_THREADS`, else every CPU this
process may use (os.sched_getaffinity), and never more than that: a job runner is confined to JOB_CPUS
cores (app/engine/runtime/job_cpu.py, all but one by default), and threads past its cores would only
take turns on them.

The other kinds run on TORCH_THREADS (1 by default): their tensors are small, and a parallel region's
start costs more than a second thread gives back. SmolLM2-135M's are not: on these two cores one step of
G 8 x 48 tokens took 42.9 s on one thread and 29.5 s on two (the sampling stays on one, sampling.py).
The count is the runner thread's own (app/engine/runtime/device.py), so a toy path running beside it in
another lane keeps its one thread.
"""
from __future__ import annotations

import os

from app.engine.runtime.job_cpu import usable_cpus

THREADS_ENV = "SMOLLM_THREADS"


def job_threads() -> int:
    configured = os.environ.get(THREADS_ENV, "").strip()
    if configured:
        value = int(configured)
        if not 1 <= value <= 256:
            raise ValueError(f"{THREADS_ENV}={configured}: must be between 1 and 256")
        return min(value, usable_cpus())
    return usable_cpus()
