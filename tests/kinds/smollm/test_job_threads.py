"""The real model's jobs' thread count (engine/threads.py): SMOLLM_THREADS, else every CPU this process may use,
never more than those (a job runner is confined to JOB_CPUS cores)."""
from __future__ import annotations

import os

import pytest

from app.kinds.smollm.engine.threads import THREADS_ENV, job_threads


def test_the_job_threads_setting(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert job_threads() == len(os.sched_getaffinity(0))
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setenv(THREADS_ENV, "3")
    assert job_threads() == min(3, cores)
    monkeypatch.setenv(THREADS_ENV, "256")
    assert job_threads() == cores  # bounded by the cores this process may run on
    monkeypatch.setenv(THREADS_ENV, "1")
    assert job_threads() == 1
    monkeypatch.setenv(THREADS_ENV, "0")
    with pytest.raises(ValueError, match=THREADS_ENV):
        job_threads()
