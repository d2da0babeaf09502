"""The real model's jobs' thread count (engine/threads.py): SMOLLM_THREADS, else every CPU this process may use."""
from __future__ import annotations

import os

import pytest

from app.kinds.smollm.engine.threads import THREADS_ENV, job_threads


def test_the_job_threads_setting(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert job_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv(THREADS_ENV, "3")
    assert job_threads() == 3
    monkeypatch.setenv(THREADS_ENV, "0")
    with pytest.raises(ValueError, match=THREADS_ENV):
        job_threads()
