"""Bounded result caches and a limit on concurrent uncached computations.

Every engine result is deterministic in its arguments, so it is cached (LRU,
bounded). A cache miss must take one of a few compute slots: extra misses
queue for a slot instead of piling onto the CPU, and when the queue itself is
full the request is refused at once (the web layer answers 503 + Retry-After).
A thread that already holds a slot (a process run needing another process's
checkpoints) does not take a second one, so nested calls cannot deadlock.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any


class ComputeBusy(RuntimeError):
    """All compute slots are taken and the waiting line is full."""


class ComputeLimiter:
    # A waiting computation gives up after timeout_s (COMPUTE_WAIT_S): a 503 at once beats a
    # request held for half a minute, and keeps the waiting threads few.
    def __init__(self, slots: int = 2, max_waiting: int = 64, timeout_s: float = 2.0) -> None:
        self.configure(slots, max_waiting, timeout_s)
        self._held = threading.local()

    def configure(self, slots: int, max_waiting: int, timeout_s: float = 2.0) -> None:
        self.slots, self.max_waiting, self.timeout_s = slots, max_waiting, timeout_s
        self._semaphore = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.waiting = 0

    def __enter__(self):
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            return self
        # The semaphore this slot is taken from, kept for its release: configure() (a new app in
        # the same process) may swap in a fresh one meanwhile, and releasing that one would be a
        # release too many ("Semaphore released too many times" under parallel tests).
        semaphore = self._semaphore
        if not semaphore.acquire(blocking=False):  # a free slot: no queueing at all
            with self._lock:
                if self.waiting >= self.max_waiting:
                    raise ComputeBusy(f"{self.slots} computations running and {self.waiting} waiting; retry shortly")
                self.waiting += 1
            try:
                if not semaphore.acquire(timeout=self.timeout_s):
                    raise ComputeBusy(f"no compute slot freed within {self.timeout_s:g} s; retry shortly")
            finally:
                with self._lock:
                    self.waiting -= 1
        self._held.depth = 1
        self._held.semaphore = semaphore
        return self

    def __exit__(self, *exc) -> None:
        self._held.depth -= 1
        if self._held.depth == 0:
            self._held.semaphore.release()


# The limiter of the app whose work this call does: bound for the call by that app (its compute
# executor, a worker process's job, a request: app/web/context.py AppContext.bound), never shared by
# two apps of one process. Unbound (a command, the job runner, a test calling the engine itself),
# nothing else computes in an app's name, so a miss takes no slot.
_BOUND: ContextVar[ComputeLimiter | None] = ContextVar("compute_limiter", default=None)


@contextlib.contextmanager
def limited_by(limiter: ComputeLimiter) -> Iterator[ComputeLimiter]:
    """Run the body with `limiter` bound: its cached computations' misses take its slots."""
    token = _BOUND.set(limiter)
    try:
        yield limiter
    finally:
        _BOUND.reset(token)


def compute_slot() -> contextlib.AbstractContextManager[Any]:
    """A slot of the bound limiter (`with compute_slot():`), or none outside an app."""
    return _BOUND.get() or contextlib.nullcontext()


class CachedComputation:
    """A function whose results are kept (LRU by summed weight) and whose misses run under the bound limiter."""

    def __init__(self, fn: Callable[..., Any], maxsize: int, weight: Callable[[Any], float]) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.maxsize, self.weight = fn, maxsize, weight
        self._signature = inspect.signature(fn)
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._weights: dict[tuple, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = bound.args
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        with compute_slot():
            result = self.fn(*key)
        with self._lock:
            if key not in self._cache:
                self._weights[key] = max(1, int(self.weight(result)))
                self._total += self._weights[key]
            self._cache[key] = result
            self._cache.move_to_end(key)
            while self._total > self.maxsize and len(self._cache) > 1:
                old, _ = self._cache.popitem(last=False)
                self._total -= self._weights.pop(old)
        return result

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._weights.clear()
            self._total = 0

    def cache_len(self) -> int:
        return len(self._cache)

    def cache_weight(self) -> int:
        return self._total


def cached_computation(maxsize: int, weight: Callable[[Any], float] = lambda result: 1):
    """LRU cache whose misses run under the bound limiter; defaults are bound, so f(x) and f(x, default) share a key.

    `maxsize` bounds the summed `weight` of the entries, so a few huge results
    (G = 4096) cannot pin as much memory as many small ones.
    """
    def decorate(fn: Callable[..., Any]) -> CachedComputation:
        return CachedComputation(fn, maxsize, weight)
    return decorate
