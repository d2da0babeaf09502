"""The compute executor: routes that may run torch await it, never the request thread pool.

Were such routes sync, each would take one of the ~40 threads of the pool every sync
route and dependency shares, and would wait there for a compute slot: a burst of distinct
expensive requests would fill the pool and /healthz would wait behind them.

Now a route hands its work to this executor, which runs it in one of two ways (COMPUTE_PROCESSES):

- **processes** (the default of `python -m app`; app/web/compute_pool.py): COMPUTE_SLOTS
  worker processes, one job each at a time. The slots are counted here, on the event loop: a
  job waits (FIFO) at most COMPUTE_WAIT_S for a free worker, then ComputeBusy (while the
  workers are still starting, it waits for them instead: up to STARTUP_WAIT_S). Every job takes
  a worker, a cached result too (the worker answers it at once); the response cache in front
  replays most repeats before they get here. Torch and the JSON encoding hold the workers'
  GILs, not the web process's (docs/reference/configuration.md "Limits").
- **threads** (COMPUTE_PROCESSES=0; the tests' TestClient apps, which would otherwise spawn
  processes per app): a ThreadPoolExecutor of COMPUTE_SLOTS + COMPUTE_QUEUE threads; at most
  COMPUTE_SLOTS of them run torch at once, under the app's limiter (its AppContext's), whose cache hits take no
  slot and whose waiting gives up after COMPUTE_WAIT_S.

Either way, past COMPUTE_SLOTS + COMPUTE_QUEUE jobs in flight a request is refused at once
(ComputeBusy: 503 + Retry-After), and the event loop stays free for /healthz and pages that
compute nothing. `run(fn, *args)` calls fn(*args); `run_in_app(fn, *args)` calls fn(app, *args)
with the app of the process it runs in (the web app, or a worker's: factory.worker_app), so a
route sends ids and plain values, never its catalog or Request (they do not pickle).
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from app.engine.runtime.compute import ComputeBusy, ComputeLimiter
from app.web.compute_pool import WorkerPool, log, rebuild, run_job

T = TypeVar("T")

MAX_THREADS = 256  # a COMPUTE_QUEUE of thousands still waits in at most this many threads
# Spawned workers take seconds to start (torch's import): jobs that arrive meanwhile wait for
# them this long, not COMPUTE_WAIT_S, which is about waiting behind other jobs.
STARTUP_WAIT_S = 60.0


class SlotGate:
    """At most `slots` jobs at once; the others wait first come, first served, at most wait_s.
    Used on the event loop only (no locks)."""

    def __init__(self, slots: int, wait_s: float) -> None:
        self.free, self.wait_s = slots, wait_s
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    async def acquire(self) -> None:
        if self.free and not self._waiters:
            self.free -= 1
            return
        slot = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            async with asyncio.timeout(self.wait_s):
                await slot
        except BaseException as exc:  # timed out, or the request was cancelled
            if slot.done() and not slot.cancelled():
                self.release()  # handed a slot just as it gave up: pass it on
            else:
                slot.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(slot)
            if isinstance(exc, TimeoutError):
                raise ComputeBusy(f"no compute slot freed within {self.wait_s:g} s; retry shortly") from None
            raise

    def release(self) -> None:
        while self._waiters:
            slot = self._waiters.popleft()
            if not slot.done():
                slot.set_result(None)
                return
        self.free += 1


class ComputeExecutor:
    def __init__(self, slots: int, queue: int, wait_s: float, limiter: ComputeLimiter | None = None,
                 pool: WorkerPool | None = None,
                 bind: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext) -> None:
        self.limiter = limiter or ComputeLimiter()
        self.limiter.configure(slots, queue, wait_s)
        self._bind = bind  # the app's context, bound around each job run in a thread (AppContext.bound)
        self.pool = pool
        self.capacity = slots + queue if pool is not None else min(slots + queue, MAX_THREADS)
        self.in_flight = 0  # touched only on the event loop
        self.app: Any = None  # the web app, handed to run_in_app's functions in thread mode (set by create_app)
        self._gate = SlotGate(slots, wait_s)
        self._starting: asyncio.Future | None = None  # the workers' start, once begun
        self._threads = None if pool is not None else \
            ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="compute")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on a compute worker; ComputeBusy at once when every place is taken."""
        return await self._run(fn, args, with_app=False)

    async def run_in_app(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(app, *args), app being the app of the process the job runs in."""
        return await self._run(fn, args, with_app=True)

    async def _run(self, fn: Callable[..., Any], args: tuple, with_app: bool) -> Any:
        if self.in_flight >= self.capacity:
            raise ComputeBusy(f"{self.in_flight} requests computing or waiting; retry shortly")
        self.in_flight += 1
        try:
            if self.pool is None:
                context = contextvars.copy_context()
                call = functools.partial(context.run, self._bound_job, fn, args, self.app if with_app else None)
                return rebuild(await asyncio.get_running_loop().run_in_executor(self._threads, call))
            await self._started()
            await self._gate.acquire()
            try:
                return rebuild(await asyncio.wrap_future(self.pool.submit(fn, args, with_app)))
            except BrokenProcessPool:
                log.error("a compute worker died (killed, or out of memory?); starting fresh ones")
                self._discard()
                raise ComputeBusy("a compute worker stopped; retry shortly") from None
            finally:
                self._gate.release()
        finally:
            self.in_flight -= 1

    def _bound_job(self, fn: Callable[..., Any], args: tuple, app: Any) -> Any:
        with self._bind():
            return run_job(fn, args, app)

    def start(self) -> None:
        """At start-up (the app's lifespan) or for the first job: the workers start in the background."""
        if self.pool is not None and self._starting is None:
            self._starting = asyncio.gather(*(asyncio.wrap_future(f) for f in self.pool.warm()))

    async def _started(self) -> None:
        """Wait (at most STARTUP_WAIT_S) for the workers to be up."""
        self.start()
        assert self._starting is not None
        if self._starting.done() and not self._starting.exception():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._starting), STARTUP_WAIT_S)
        except TimeoutError:
            raise ComputeBusy("the compute workers are still starting; retry shortly") from None
        except Exception:
            log.exception("the compute workers failed to start")
            self._discard()
            raise ComputeBusy("the compute workers failed to start; retry shortly") from None

    def _discard(self) -> None:
        assert self.pool is not None
        self.pool.discard()
        self._starting = None  # the next job starts fresh workers, and waits for them

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
