"""Worker processes for the compute executor (app/web/executor.py), and what crosses to them.

Why processes: torch and the encoding of a megabyte of JSON (a G = 4096 tensors body) hold the
GIL for long stretches; in threads of the web process they kept the event loop, and so
/healthz and every replayed page, waiting ~100 ms at p99 under 64 clients of such requests.
In a process of its own that work holds its own GIL, and the web process only sends bytes.

- The pool is a ProcessPoolExecutor of COMPUTE_SLOTS workers with the "spawn" context: the
  web process has threads (uvicorn's, the response cache's) and torch loaded, and forking
  such a process may copy a lock some other thread held. Spawned workers import the app
  afresh (~2 s with torch); each is started the first time a job needs it, or in the
  background at start-up (`warm`, from the app's lifespan), and lives until the app stops.
- Each worker is set up by `_init_worker`: `os.nice(WORKER_NICE)`, so on a 2-core machine the
  web process wins the CPU when both compete (and the job runner, at JOB_NICE 19, loses it to
  both); `house.configure_worker(settings)`, the set-up every computing process shares (torch
  threads); then its own app state (`house.worker_app`: catalog,
  uploads, device, the kinds' state), built once; then, with WARM_UP, every featured step drawn
  once (app/web/warm_up.py), after which it counts itself in the pool's `warmed` (shared memory),
  so the web process knows when every worker serves at warm speed.
- A job is `_job(fn, args, with_app)`: fn is a module-level function (pickled by name), its
  arguments plain values. `with_app` hands fn the worker's app first, so a route sends ids,
  not a catalog. What comes back must pickle: a starlette Response becomes `Finished` (status,
  raw headers, body: JSON encoded and gzip applied in the worker), rebuilt here by `rebuild`.
- An exception raised by fn is raised again in the web process, the same class with the same
  attributes, so the error handlers give the same HTTP answer (NotFound 404, ComputeBusy 503,
  RequestValidationError 422, ...). `_portable` makes sure it survives pickling: one that does
  not unpickle in the parent would break the whole pool, so it is checked in the worker first.
"""
from __future__ import annotations

import copyreg
import logging
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import Response, StreamingResponse

if TYPE_CHECKING:
    from app.web.settings import Settings

log = logging.getLogger("app.compute")

WORKER_NICE = 10  # CFS weight 110 against the web process's 1024: the event loop runs first
STOP_GRACE_S = 5.0  # at shutdown, a worker not gone after this is terminated (an idle one takes ~1-3 s:
                    # the interpreter's exit with torch loaded, niced, both workers at once)

# The worker process's own app (house.worker_app), set by _init_worker; None in the web process.
# A per-process handle, kept global because a ProcessPoolExecutor's initializer can hand its jobs
# nothing else: each spawned worker serves exactly one app, whose context (job client, limiter, ...)
# is its own, and the web process (and every app a test builds in it) never sets it.
_APP: Any = None


@dataclass(frozen=True)
class Finished:
    """A finished response, as bytes: what a worker sends back instead of a starlette Response."""
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


def finished(result: Any) -> Any:
    if isinstance(result, StreamingResponse) or (isinstance(result, Response) and result.background):
        raise TypeError(f"a compute job must return a finished response, not {type(result).__name__}")
    if isinstance(result, Response):
        return Finished(result.status_code, list(result.raw_headers), bytes(result.body))
    return result


def rebuild(result: Any) -> Any:
    """Finished -> a Response sending exactly those bytes and headers; anything else as it is."""
    if not isinstance(result, Finished):
        return result
    response = Response(result.body, status_code=result.status)
    response.raw_headers = list(result.headers)  # content-length, type and encoding included
    return response


def run_job(fn, args: tuple, app: Any) -> Any:
    """One job: fn(*args), or fn(app, *args) when the job asked for the app."""
    return finished(fn(app, *args) if app is not None else fn(*args))


def _job(fn, args: tuple, with_app: bool) -> Any:
    """In a worker: the job, its exception made portable."""
    try:
        with _APP.state.context.bound():  # the worker app's limiter and words for nodes
            return run_job(fn, args, _APP if with_app else None)
    except Exception as exc:
        portable = _portable(exc)
        if portable is exc:
            raise
        raise portable from exc


def _rebuild_exception(cls: type, args: tuple, state: dict) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.__dict__.update(state)
    return exc


def _reduce_exception(exc: BaseException):
    # Without calling __init__: HTTPException(status_code=404) keeps no positional args, so
    # the default cls(*args) would fail in the parent, where a failure breaks the pool.
    return _rebuild_exception, (type(exc), exc.args, dict(exc.__dict__))


def _round_trips(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True


def _portable(exc: Exception) -> Exception:
    """exc if it survives pickling (if need be, taught to: by __new__ and its __dict__), else a
    RuntimeError naming it (a 500, as the original would have been unless a handler knew it)."""
    if _round_trips(exc):
        return exc
    copyreg.pickle(type(exc), _reduce_exception)
    if _round_trips(exc):
        return exc
    return RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")


def _init_worker(settings: Settings, configure: Callable[[Settings], None], build_app: Callable[[Settings], Any],
                 warmed: Any) -> None:
    """The worker's set-up: configure and build_app are app/house.py's configure_worker and
    worker_app (handed in, pickled by name: the shared layers never import the registry); `warmed`,
    a shared counter of the workers done warming."""
    global _APP
    os.nice(WORKER_NICE)
    configure(settings)
    _APP = build_app(settings)
    if settings.warm_up:
        from app.web.warm_up import warm_worker
        with _APP.state.context.bound():
            drawn, failed, seconds = warm_worker(_APP)
        log.info("compute worker %d warm: %d pages in %.1f s (%d failed)", os.getpid(), drawn, seconds, failed)
    with warmed.get_lock():
        warmed.value += 1


def _ready() -> int:
    return os.getpid()


class WorkerPool:
    """COMPUTE_SLOTS worker processes, started on first use; `submit` returns a Future."""

    def __init__(self, settings: Settings, workers: int, configure: Callable[[Settings], None],
                 build_app: Callable[[Settings], Any]) -> None:
        self.settings, self.workers = settings, workers
        self._setup = (settings, configure, build_app)
        self._executor: ProcessPoolExecutor | None = None
        self._warmed: Any = None  # how many of the current pool's workers are set up (and warm)

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context("spawn")
            self._warmed = context.Value("i", 0)
            self._executor = ProcessPoolExecutor(self.workers, mp_context=context,
                                                 initializer=_init_worker, initargs=(*self._setup, self._warmed))
        return self._executor

    def all_warm(self) -> bool:
        """Every worker of the current pool is set up (with WARM_UP, has drawn the featured steps)."""
        return self._warmed is not None and self._warmed.value >= self.workers

    def submit(self, fn, args: tuple, with_app: bool) -> Future:
        return self._pool().submit(_job, fn, args, with_app)

    def warm(self) -> list[Future]:
        """Start every worker now (a spawned worker starts only for a job): done when all are up."""
        pool = self._pool()
        return [pool.submit(_ready) for _ in range(self.workers)]

    def discard(self) -> None:
        """After a worker died (BrokenProcessPool): the next job starts a fresh pool."""
        broken, self._executor = self._executor, None
        if broken is not None:
            broken.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the workers: queued jobs cancelled, the workers given STOP_GRACE_S to exit, then terminated.
        (uvicorn lets the requests in flight finish first, so normally no job is running.)"""
        pool, self._executor = self._executor, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())  # no public handle on them
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.warning("compute worker %s not stopped within %g s: terminated", process.pid, STOP_GRACE_S)
                process.terminate()
