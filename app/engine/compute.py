"""Bounded result caches and a limit on concurrent uncached computations.

Every engine result is deterministic in its arguments, so it is cached (LRU,
bounded). A cache miss must take one of a few compute slots: extra misses
queue for a slot instead of piling onto the CPU, and when the queue itself is
full the request is refused at once (the web layer answers 503 + Retry-After).
A thread that already holds a slot (a process run needing another process's
checkpoints) does not take a second one, so nested calls cannot deadlock.
"""
from __future__ import annotations

import functools
import inspect
import threading
from collections import OrderedDict


class ComputeBusy(RuntimeError):
    """All compute slots are taken and the waiting line is full."""


class ComputeLimiter:
    def __init__(self, slots: int = 2, max_waiting: int = 64, timeout_s: float = 30.0) -> None:
        self.configure(slots, max_waiting, timeout_s)
        self._held = threading.local()

    def configure(self, slots: int, max_waiting: int, timeout_s: float = 30.0) -> None:
        self.slots, self.max_waiting, self.timeout_s = slots, max_waiting, timeout_s
        self._semaphore = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.waiting = 0

    def __enter__(self):
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            return self
        if not self._semaphore.acquire(blocking=False):  # a free slot: no queueing at all
            with self._lock:
                if self.waiting >= self.max_waiting:
                    raise ComputeBusy(f"{self.slots} computations running and {self.waiting} waiting; retry shortly")
                self.waiting += 1
            try:
                if not self._semaphore.acquire(timeout=self.timeout_s):
                    raise ComputeBusy(f"no compute slot freed within {self.timeout_s:g} s; retry shortly")
            finally:
                with self._lock:
                    self.waiting -= 1
        self._held.depth = 1
        return self

    def __exit__(self, *exc) -> None:
        self._held.depth -= 1
        if self._held.depth == 0:
            self._semaphore.release()


LIMITER = ComputeLimiter()


def cached_computation(maxsize: int, weight=lambda result: 1):
    """LRU cache whose misses run under LIMITER; defaults are bound, so f(x) and f(x, default) share a key.

    `maxsize` bounds the summed `weight` of the entries, so a few huge results
    (G = 4096) cannot pin as much memory as many small ones.
    """
    def decorate(fn):
        cache: OrderedDict = OrderedDict()
        weights: dict = {}
        total = 0
        lock = threading.Lock()
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
            with lock:
                if args in cache:
                    cache.move_to_end(args)
                    return cache[args]
            with LIMITER:
                result = fn(*args)
            nonlocal total
            with lock:
                if args not in cache:
                    weights[args] = max(1, int(weight(result)))
                    total += weights[args]
                cache[args] = result
                cache.move_to_end(args)
                while total > maxsize and len(cache) > 1:
                    old, _ = cache.popitem(last=False)
                    total -= weights.pop(old)
            return result

        def cache_clear() -> None:
            nonlocal total
            with lock:
                cache.clear()
                weights.clear()
                total = 0

        wrapper.cache_clear = cache_clear
        wrapper.cache_len = lambda: len(cache)
        wrapper.cache_weight = lambda: total
        wrapper.maxsize = maxsize
        return wrapper
    return decorate
