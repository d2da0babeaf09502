"""The tiny-LM training paths run in the background (issue 13): 10–25 s each is too long for a
request, so a page starts a run and polls its progress. One run at a time (a 2-core machine
would only slow two runs down), results kept by (path, seed, device) so a second visit is instant.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from app.domain.training_paths import PATH_IDS
from app.kinds.tiny_lm.engine.lm_paths import PathResult, run_path

KEEP = 16  # finished runs kept


@dataclass
class PathJob:
    path: str
    seed: int
    device: str
    stage: str = "queued"
    step: int = 0
    done: int = 0
    total: int = 0
    started: float = field(default_factory=time.monotonic)
    result: PathResult | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


class PathJobs:
    def __init__(self) -> None:
        self._jobs: OrderedDict[tuple[str, int, str], PathJob] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lm-path")

    def get(self, path: str, seed: int, device: str, start: bool = True) -> PathJob | None:
        """The run of (path, seed, device): started if `start` and none exists (or the last one failed)."""
        if path not in PATH_IDS:
            raise KeyError(path)
        key = (path, seed, device)
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.error is None:
                self._jobs.move_to_end(key)
                return job
            if not start:
                return job
            job = self._jobs[key] = PathJob(path, seed, device)
            while len(self._jobs) > KEEP:
                oldest = next(iter(self._jobs))
                if not self._jobs[oldest].finished:
                    break
                del self._jobs[oldest]
        self._pool.submit(self._run, job)
        return job

    @staticmethod
    def _run(job: PathJob) -> None:
        def progress(stage: str, step: int, done: int, total: int) -> None:
            job.stage, job.step, job.done, job.total = stage, step, done, total

        try:
            job.result = run_path(job.path, job.seed, progress, job.device)
        except Exception as exc:  # shown on the page; the next visit starts again
            job.error = f"{type(exc).__name__}: {exc}"


PATH_JOBS = PathJobs()
