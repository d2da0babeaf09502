"""The compute executor: routes that may run torch await it, never the request thread pool.

Before, such routes were sync, so each took one of the ~40 threads of the pool every sync
route and dependency shares, and waited there for a compute slot (up to 30 s): 64 clients
of distinct expensive requests filled the pool and /healthz waited behind them.

Now a route hands its work to this ThreadPoolExecutor of its own, sized for the compute slots
and the waiting line (COMPUTE_SLOTS + COMPUTE_QUEUE threads; at most COMPUTE_SLOTS of them run
torch at once, under the engine's LIMITER, whose cache hits take no slot). Past that many
jobs in flight a request is refused at once (ComputeBusy: 503 + Retry-After), and a job
waits at most COMPUTE_WAIT_S for a slot. The event loop and the request pool stay free:
/healthz and pages that compute nothing answer whatever the compute load.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from app.engine.runtime.compute import LIMITER, ComputeBusy, ComputeLimiter

T = TypeVar("T")

MAX_THREADS = 256  # a COMPUTE_QUEUE of thousands still waits in at most this many threads


class ComputeExecutor:
    def __init__(self, slots: int, queue: int, wait_s: float, limiter: ComputeLimiter = LIMITER) -> None:
        limiter.configure(slots, queue, wait_s)
        self.capacity = min(slots + queue, MAX_THREADS)
        self.in_flight = 0  # touched only on the event loop
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="compute")

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """fn(*args, **kwargs) on a compute thread; ComputeBusy at once when every thread is taken."""
        if self.in_flight >= self.capacity:
            raise ComputeBusy(f"{self.in_flight} requests computing or waiting; retry shortly")
        self.in_flight += 1
        try:
            context = contextvars.copy_context()
            call = functools.partial(context.run, fn, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        finally:
            self.in_flight -= 1

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
