"""torch's intra-op thread count is per thread (app/engine/runtime/device.py): the real model's job may run on
every core while a runner thread of another lane, pinned at its start, keeps its own count."""
from __future__ import annotations

import threading

import torch

from app.engine.runtime.device import intra_op_threads, pin_threads


def in_thread(work):
    out = {}
    thread = threading.Thread(target=lambda: out.update(work()))
    thread.start()
    thread.join()
    return out


def test_a_thread_sets_its_own_count_and_restores_it():
    pin_threads(1)
    def work():
        pin_threads(1)
        with intra_op_threads(3):
            inside = torch.get_num_threads()
        return {"inside": inside, "after": torch.get_num_threads()}
    seen = in_thread(work)
    assert seen == {"inside": 3, "after": 1}
    assert torch.get_num_threads() == 1  # the caller's own count never moved


def test_a_pinned_thread_keeps_its_count_when_another_sets_a_larger_one():
    pinned, changed, done = threading.Event(), threading.Event(), {}

    def other_lane():
        pin_threads(1)
        pinned.set()
        changed.wait(10)
        torch.ones(1000).sum()  # an op after the other thread's change
        done["count"] = torch.get_num_threads()

    thread = threading.Thread(target=other_lane)
    thread.start()
    pinned.wait(10)
    with intra_op_threads(4):  # the real model's lane, meanwhile
        changed.set()
        thread.join()
    assert done["count"] == 1
