"""The job runner beside a web process (JOB_RUNNER=process, `python -m app`'s default): one
`python -m app.worker` child per web process, started with the app and stopped with it.

A process, not a thread: a run holds the GIL for long stretches of small-tensor Python, and the
web process's event loop must not wait on it. The child gets this process's effective store and
device settings in its environment. If it dies (a crash, a `kill -9`), it is started again after
a pause that doubles up to a minute; its job goes to whichever runner claims it once the lease
is over (this one's successor, or another replica's). With `--parent-pid` the child stops by
itself if this process is killed.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

from app.web.settings import Settings

log = logging.getLogger("app.jobs")
MAX_PAUSE_S = 60.0


def child_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"DATA_DIR": str(settings.resolved_data_dir), "DEVICE": settings.device,
                "JOB_LEASE_S": str(settings.job_lease_s), "TORCH_THREADS": str(settings.torch_threads),
                "LOG_LEVEL": settings.log_level})
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    return env


class RunnerProcess:
    def __init__(self, settings: Settings) -> None:
        self._env = child_env(settings)
        self._stopping = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._supervise, name="job-runner-supervisor", daemon=True)
        self._thread.start()

    def _spawn(self) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "app.worker", "--parent-pid", str(os.getpid())],
                                env=self._env, stdin=subprocess.DEVNULL)

    def _supervise(self) -> None:
        pause = 1.0
        while not self._stopping.is_set():
            with self._lock:
                if self._stopping.is_set():
                    return
                self._proc = proc = self._spawn()
            log.info("job runner started: pid %d", proc.pid)
            code = proc.wait()
            if self._stopping.is_set():
                return
            log.warning("job runner pid %d exited with %s; starting another in %.0f s", proc.pid, code, pause)
            self._stopping.wait(pause)
            pause = min(2 * pause, MAX_PAUSE_S)

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # SIGTERM: it hands its job back to the queue
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
