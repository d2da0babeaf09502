"""Bounded caches and the compute-slot limit."""
import threading
import time

import pytest

from app.engine.runtime.compute import ComputeBusy, ComputeLimiter, cached_computation, limited_by


def test_cache_binds_defaults_and_evicts_by_weight():
    calls = []

    @cached_computation(maxsize=10, weight=lambda r: r)
    def f(x, y=1):
        calls.append((x, y))
        return x

    assert f(3) == f(3, 1) == 3 and calls == [(3, 1)]
    f(4)  # total weight 7
    f(5)  # 12 > 10: the oldest (3) goes
    assert f.cache_len() == 2 and f.cache_weight() == 9
    f(3)
    assert calls.count((3, 1)) == 2
    f.cache_clear()
    assert f.cache_len() == 0 and f.cache_weight() == 0


def test_limiter_queues_then_refuses():
    limiter = ComputeLimiter(slots=1, max_waiting=1, timeout_s=5)
    entered, release = threading.Event(), threading.Event()

    def hold():
        with limiter:
            entered.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    entered.wait(5)
    waiter_done = []
    waiter = threading.Thread(target=lambda: (limiter.__enter__(), waiter_done.append(1), limiter.__exit__()))
    waiter.start()
    deadline = time.time() + 5
    while limiter.waiting < 1 and time.time() < deadline:
        time.sleep(0.01)
    with pytest.raises(ComputeBusy):  # one running, one waiting: the third is refused at once
        limiter.__enter__()
    release.set()
    holder.join(5)
    waiter.join(5)
    assert waiter_done == [1]


def test_nested_calls_reuse_the_callers_slot():
    limiter = ComputeLimiter(slots=1, max_waiting=0, timeout_s=0.1)
    with limiter:
        with limiter:  # would deadlock / be refused if it took a second slot
            pass
    with limiter:
        pass


def test_each_app_configures_a_limiter_of_its_own():
    from app.house import create_app
    from app.web.settings import Settings
    app = create_app(Settings(compute_slots=3, compute_queue=7))
    other = create_app(Settings())
    limiter = app.state.context.limiter
    assert (limiter.slots, limiter.max_waiting) == (3, 7)
    assert other.state.context.limiter is not limiter
    assert (limiter.slots, limiter.max_waiting) == (3, 7)  # the second app left it alone


def test_a_miss_takes_a_slot_of_the_bound_limiter_only():
    limiter = ComputeLimiter(slots=1, max_waiting=0, timeout_s=0.1)

    @cached_computation(maxsize=8)
    def double(x: int) -> int:
        return 2 * x

    with limiter, limited_by(ComputeLimiter(slots=1, max_waiting=0, timeout_s=0.1)):
        assert double(1) == 2  # another app's limiter is bound: this one's taken slot does not matter
    with limited_by(limiter):
        with limiter:
            assert double(2) == 4  # a slot it holds already: not a second one
    thread_refused: list[Exception] = []

    def miss() -> None:
        try:
            with limited_by(limiter):
                double(3)
        except ComputeBusy as exc:
            thread_refused.append(exc)
    with limiter:
        thread = threading.Thread(target=miss)
        thread.start()
        thread.join()
    assert len(thread_refused) == 1


def test_a_slot_taken_before_a_reconfigure_is_given_back_to_its_own_semaphore():
    """A new app configures the process's limiter while another's computation holds a slot (parallel
    tests, a worker process's start): that slot goes back to the semaphore it came from, not to the
    fresh one, which raised "Semaphore released too many times" (seen in test_response_schemas
    under -n 2) and would leave one slot too many."""
    limiter = ComputeLimiter(slots=1, max_waiting=0, timeout_s=0.1)
    with limiter:
        limiter.configure(slots=1, max_waiting=0, timeout_s=0.1)
    refused: list[Exception] = []

    def enter() -> None:
        try:
            with limiter:
                pass
        except ComputeBusy as exc:
            refused.append(exc)
    with limiter:   # the fresh semaphore has exactly its one slot: a second thread is refused
        thread = threading.Thread(target=enter)
        thread.start()
        thread.join()
    assert len(refused) == 1
