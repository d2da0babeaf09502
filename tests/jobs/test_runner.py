"""The engine side of jobs: the result codec (exact, and never code from the database), and a
runner's life with a task: done, failed with its error, a lost lease (it stops and writes nothing),
a stop (the job goes back to the queue)."""
from __future__ import annotations

import io
import json
import math
import pickle
import random
import struct
import threading
from dataclasses import dataclass

import job_tasks
import pytest
import torch

from app.engine.jobs import codec
from app.engine.jobs.runner import JobRunner
from app.engine.jobs.tasks import JobTask, code_version
from app.stores.jobs import open_job_backend


@dataclass(frozen=True)
class Point:
    x: float
    label: str


@dataclass(frozen=True)
class Run:
    points: tuple[Point, ...]
    state: dict
    by_pair: dict


def test_codec_round_trips_exactly():
    weights = torch.randn(3, 4, dtype=torch.float64)
    run = Run((Point(0.1 + 0.2, "a"), Point(float("inf"), "b")), {"w": weights}, {(1, 2): [3, None]})
    back = codec.loads(codec.dumps(run), (Run, Point))
    assert back.points == run.points and isinstance(back.points, tuple)
    assert torch.equal(back.state["w"], weights) and back.state["w"].dtype == torch.float64
    assert back.by_pair == {(1, 2): [3, None]}


def test_long_runs_of_floats_are_stored_in_one_pool_and_come_back_the_same():
    """Every run of floats (the real model's per-token norms) is a slice of the result's one float64 tensor in
    the bytes, and the same tuples, lists and numbers when read: nan, inf, -0.0 and every last bit; short,
    ragged, int or bool runs stay as they are."""
    rng = random.Random(3)
    rows = tuple(tuple(rng.uniform(-1e30, 1e30) for _ in range(80)) for _ in range(8))
    flat = [rng.random() for _ in range(300)] + [float("nan"), float("inf"), -0.0, 5e-324]
    run = Run((Point(1.0, "a"),), {"rows": rows, "flat": flat, "short": (0.5, 1.5), "ints": list(range(400)),
                                   "bools": [True] * 300, "ragged": ((1.0,) * 200, (2.0,) * 199),
                                   "mixed": [1.0] * 299 + [1]}, {})
    raw = codec.dumps(run)
    stored = torch.load(io.BytesIO(raw), weights_only=True)
    tree, pool = json.loads(stored["tree"])["state"], stored["pool"]
    assert stored["tensors"] == []
    assert pool.dtype == torch.float64 and pool.shape == (8 * 80 + len(flat),)  # the only tensor
    assert tree["rows"][codec.FLOATS] == [0, 640, 80] and tree["flat"][codec.FLOATS] == [640, len(flat), 0]
    assert all(codec.FLOATS not in str(tree[k])[:40] for k in ("short", "ints", "bools", "ragged", "mixed"))
    back = codec.loads(raw, (Run, Point)).state
    assert type(back["rows"]) is tuple and all(type(r) is tuple for r in back["rows"]) and back["rows"] == rows
    assert type(back["flat"]) is list and len(back["flat"]) == len(flat)
    assert [struct.pack("<d", v) for v in back["flat"]] == [struct.pack("<d", v) for v in flat]  # bits: nan, -0.0
    for key in ("short", "ints", "bools", "ragged", "mixed"):
        assert back[key] == run.state[key] and type(back[key]) is type(run.state[key]), key
    assert all(type(v) is bool for v in back["bools"])


def test_a_result_stored_before_the_pool_still_reads():
    raw = io.BytesIO()
    torch.save({"a": {codec.FLOATS: torch.tensor([[1.0, 2.0], [3.0, -0.0]], dtype=torch.float64), "outer": "tuple",
                      "inner": "list"}}, raw)
    assert codec.loads(raw.getvalue(), ()) == {"a": ([1.0, 2.0], [3.0, -0.0])}


def pooled(tree, pool, tensors=()):
    raw = io.BytesIO()
    torch.save({codec.FORMAT: codec.VERSION, "tree": json.dumps(tree), "pool": pool, "tensors": list(tensors)}, raw)
    return raw.getvalue()


@pytest.mark.parametrize(("tree", "pool", "match"), [
    ({codec.FLOATS: torch.zeros(3), "outer": "set", "inner": None}, None, "malformed"),
    ({codec.FLOATS: [0, 3, 0], "outer": "list", "inner": None}, torch.zeros(2, dtype=torch.float64), "outside"),
    ({codec.FLOATS: [-1, 1, 0], "outer": "list", "inner": None}, torch.zeros(2, dtype=torch.float64), "outside"),
    ({codec.FLOATS: [0, 3, 2], "outer": "list", "inner": "tuple"}, torch.zeros(4, dtype=torch.float64), "outside"),
    ({codec.FLOATS: [0, 2, 0], "outer": "list", "inner": None}, None, "malformed"),  # a pooled run, no pool
    ({codec.FLOATS: ["0", 2, 0], "outer": "list", "inner": None}, torch.zeros(2, dtype=torch.float64), "malformed"),
    ({"x": 1}, torch.zeros(2, dtype=torch.float32), "pool"),
    ({codec.TENSOR: 0}, torch.zeros(0, dtype=torch.float64), "tensor"),
    ({codec.KEY: "Point", "x": 1.0}, torch.zeros(0, dtype=torch.float64), "Point"),
])
def test_a_malformed_run_of_floats_is_refused(tree, pool, match):
    raw = pooled(tree, pool) if pool is not None else None
    if raw is None:
        buffer = io.BytesIO()
        torch.save(tree, buffer)
        raw = buffer.getvalue()
    with pytest.raises(codec.CodecError, match=match):
        codec.loads(raw, ())


def test_the_tree_is_json_and_every_leaf_comes_back_as_it_was():
    """Floats by repr (the same float64: 0.1 + 0.2, 5e-324, -0.0, inf, nan), ints past 2**53, bools apart
    from ints, strings with any code point (a lone surrogate too), None, tensors by index, tuple keys."""
    weights = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    leaves = [0.1 + 0.2, 5e-324, -0.0, float("inf"), float("-inf"), 2**64 + 1, True, 1, "é\u2603\ud800\n\"", None]
    run = Run((Point(float("nan"), "n"),), {"leaves": leaves, "t": weights, "nested": ((1, (2.5, "x")), [])},
              {(1, "a"): (weights, 3), (2.0,): None})
    raw = codec.dumps(run)
    stored = torch.load(io.BytesIO(raw), weights_only=True)
    assert json.loads(stored["tree"])  # plain JSON
    assert len(stored["tensors"]) == 2 and stored["pool"].numel() == 0
    back = codec.loads(raw, (Run, Point))
    got = back.state["leaves"]
    assert [type(v) for v in got] == [type(v) for v in leaves]
    assert [struct.pack("<d", v) for v in got[:5]] == [struct.pack("<d", v) for v in leaves[:5]]
    assert got[5:] == leaves[5:]
    assert math.isnan(back.points[0].x) and back.points[0].label == "n"
    assert torch.equal(back.state["t"], weights) and back.state["t"].dtype == torch.int64
    assert back.state["nested"] == ((1, (2.5, "x")), []) and type(back.state["nested"][1]) is list
    key_tensor, three = back.by_pair[(1, "a")]
    assert torch.equal(key_tensor, weights) and three == 3 and back.by_pair[(2.0,)] is None


def test_arrays_of_doubles_come_back_as_arrays_of_the_same_bits():
    from array import array

    values = array("d", [0.1, -0.0, float("nan"), float("inf"), 5e-324] + [random.Random(1).random() for _ in range(900)])
    run = Run((), {"a": values, "empty": array("d"), "b": values[:3]}, {})
    stored = torch.load(io.BytesIO(codec.dumps(run)), weights_only=True)
    assert stored["pool"].numel() == len(values) + 3
    back = codec.loads(codec.dumps(run), (Run,)).state
    assert all(type(back[k]) is array and back[k].typecode == "d" for k in ("a", "empty", "b"))
    assert back["a"].tobytes() == values.tobytes() and back["b"].tobytes() == values[:3].tobytes()
    assert len(back["empty"]) == 0
    with pytest.raises(codec.CodecError, match="typecode"):
        codec.dumps(Run((), {"f": array("f", [1.0])}, {}))
    for place, match in (([0, 9], "outside"), ([0], "malformed"), (["0", 1], "malformed")):
        with pytest.raises(codec.CodecError, match=match):
            codec.loads(pooled({codec.ARRAY: place}, torch.zeros(4, dtype=torch.float64)), ())


def test_codec_refuses_a_type_the_task_does_not_allow_and_never_unpickles_code():
    with pytest.raises(codec.CodecError, match="Point"):
        codec.loads(codec.dumps(Point(1.0, "a")), (Run,))

    class Boom:
        def __reduce__(self):
            return (print, ("code ran",))
    buffer = io.BytesIO()
    torch.save({"x": Boom()}, buffer, pickle_module=pickle)
    with pytest.raises(codec.CodecError, match="unreadable"):
        codec.loads(buffer.getvalue(), (Run,))
    with pytest.raises(codec.CodecError):
        codec.dumps(object())


def make_task(run) -> JobTask:
    return job_tasks.task("t", run, (Point,), lambda params, result: {"x": result.x}, lambda params: "test")


@pytest.fixture
def store(tmp_path):
    backend = open_job_backend(tmp_path)
    yield backend
    backend.close()


def test_a_runner_runs_a_job_once_and_stores_its_result(store):
    calls = []

    def run(params, progress):
        calls.append(params)
        for i in range(3):
            progress("s", i, i + 1, 3)
        return Point(params["seed"] / 7, "done")

    job = store.ensure(make_task(run).spec({"seed": 3}))
    runner = JobRunner(store, {"t": make_task(run)}, name="host:1")
    assert runner.run_one() and not runner.run_one()
    done = store.get(job.id)
    assert done.state == "done" and done.runner == "host:1" and done.attempts == 1 and [c.model_dump() for c in calls] == [{"seed": 3}]
    assert codec.loads(store.result(job.id), (Point,)) == Point(3 / 7, "done")
    assert done.code_version == code_version()


def test_a_failing_task_is_stored_failed_with_its_error(store):
    def run(params, progress):
        raise RuntimeError("diverged at step 4")

    job = store.ensure(make_task(run).spec({"seed": 1}))
    assert JobRunner(store, {"t": make_task(run)}, name="h:2").run_one()
    failed = store.get(job.id)
    assert failed.state == "failed" and failed.error == "RuntimeError: diverged at step 4"


def test_a_runner_whose_lease_was_taken_stops_and_writes_nothing(store):
    def run(params, progress):
        store.release(job.id, "h:3")  # as if it stalled past its lease and another took the job
        store.claim("h:4", 30, ("t",), ("cpu",), code_version())
        progress("s", 1, 1, 2)
        return Point(1.0, "never stored")

    job = store.ensure(make_task(run).spec({"seed": 2}))
    assert JobRunner(store, {"t": make_task(run)}, name="h:3").run_one()
    held = store.get(job.id)
    assert held.state == "running" and held.runner == "h:4" and store.result(job.id) is None


def test_a_stopping_runner_hands_its_job_back(store):
    stop = threading.Event()

    def run(params, progress):
        progress("s", 1, 1, 4)
        stop.set()
        progress("s", 2, 2, 4)
        return Point(0.0, "never stored")

    job = store.ensure(make_task(run).spec({"seed": 5}))
    JobRunner(store, {"t": make_task(run)}, name="h:5").run_forever(stop)
    back = store.get(job.id)
    assert back.state == "queued" and back.runner is None and back.fraction == 0.25
