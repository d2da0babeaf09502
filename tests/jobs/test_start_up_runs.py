"""The server's own runs (its kinds' defaults, issue 47) never compete with a visitor's: on both backends the
lanes claim only visitors' jobs and the start-up runner only the server's, oldest first; a visitor asking for
a queued default run makes it theirs; a start-up run pauses at its next progress call while a lane runs a
visitor's job and resumes after; the start-up runner claims nothing while a lane is busy; the defaults are
queued in the order a visitor needs them; a page says where a default run waits."""
from __future__ import annotations

import threading
import time

import job_tasks

from app.engine.jobs.client import JobClient
from app.engine.jobs.runner import PAUSED, JobRunner, Lanes, process_runners
from app.engine.jobs.tasks import Job, code_version
from app.stores.jobs import SERVER, Ask, JobSpec, open_job_backend
from app.web.kind import FIRST_PAGE, FIRST_PATH, LONG_PATHS, REAL_STEP, DefaultRun

CODE = "test-code"
SERVERS = Ask(client=SERVER, keep=True)
VISITOR = Ask(client="203.0.113.7")


def spec(seed: int, task: str = "t") -> JobSpec:
    return JobSpec("k", task, {"seed": seed, "device": "cpu"}, CODE, f"seed {seed}")


def claim(store, whose: str, name: str = "r"):
    return store.claim(name, 30.0, ("t",), ("cpu",), CODE, whose)


def test_lanes_take_visitors_jobs_and_the_start_up_runner_the_servers_oldest_first(store):
    for seed in (1, 2, 3):
        store.ensure(spec(seed), SERVERS)
        time.sleep(0.01)
    store.ensure(spec(9), VISITOR)
    visitor = claim(store, "visitors")
    assert visitor.id == spec(9).id and claim(store, "visitors") is None  # never a server's run
    assert [claim(store, "server", f"s{i}").id for i in range(3)] == [spec(s).id for s in (1, 2, 3)]
    assert claim(store, "server") is None
    store.ensure(spec(10), VISITOR)
    assert claim(store, "any").id == spec(10).id  # "any" (older runners, operators) takes either


def test_a_visitor_asking_for_a_queued_default_run_makes_it_theirs(store):
    store.ensure(spec(1), SERVERS)
    store.ensure(spec(1), Ask())  # an anonymous ask (an operator, a test) leaves it the server's
    assert store.get(spec(1).id).client == SERVER
    again = store.ensure(spec(1), VISITOR)
    assert again.client == VISITOR.client and again.keep  # still kept: nobody's reading does not expire it
    assert claim(store, "server") is None and claim(store, "visitors").id == spec(1).id


def test_the_defaults_are_queued_in_the_order_a_visitor_needs_them(tmp_path):
    from app.engine.jobs.client import JobClient
    from app.web.jobs.start import queue_default_runs

    task = job_tasks.task("t", title=lambda p: str(p["n"]))
    store = open_job_backend(tmp_path / "data")
    jobs = JobClient()
    jobs.configure(store, {"t": task}, "off")

    def job(n: int) -> Job:
        return task.params(n=n).job()
    queue_default_runs(jobs, [DefaultRun(job(0), LONG_PATHS), DefaultRun(job(1), REAL_STEP), job(2),
                              DefaultRun(job(3), FIRST_PATH), DefaultRun(job(4), FIRST_PAGE),
                              DefaultRun(job(5), LONG_PATHS)])
    order = [job.params["n"] for job in sorted(store.listing(), key=lambda j: j.created_at)]
    assert order == [2, 4, 3, 1, 0, 5]  # FIRST_PAGE (a plain job is one), FIRST_PATH, REAL_STEP, LONG_PATHS
    assert {job.client for job in store.listing()} == {SERVER}


class Timeline:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, str]] = []
        self.visitor_started = threading.Event()
        self.release_visitor = threading.Event()

    def mark(self, what: str) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what))


def tasks(timeline: Timeline) -> dict[str, job_tasks.JobTask]:
    def background(params, progress):
        for i in range(params["steps"]):
            progress("training", i, i, params["steps"])
            timeline.mark("server step")
            time.sleep(0.01)
        return "server done"

    def visitor(params, progress):
        timeline.mark("visitor start")
        timeline.visitor_started.set()
        timeline.release_visitor.wait(10)
        timeline.mark("visitor end")
        return "visitor done"

    def make(name, fn, lane):
        return job_tasks.task(name, fn, lane=lane)
    return {"long": make("long", background, "long"), "short": make("short", visitor, "short")}


def test_a_start_up_run_pauses_while_a_visitors_run_computes_and_resumes_after(tmp_path):
    store = open_job_backend(tmp_path / "data")
    timeline = Timeline()
    runners = process_runners(store, tasks(timeline), ("cpu",), 30.0, "host:1", None, poll_s=0.02)
    assert [r.name for r in runners] == ["host:1/long", "host:1/short", "host:1/start-up"]
    stop = threading.Event()
    threads = [threading.Thread(target=r.run_forever, args=(stop,), daemon=True) for r in runners]
    server_run = store.ensure(JobSpec("k", "long", {"steps": 150}, code_version(), "long"), SERVERS)
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 10
        while not any(what == "server step" for _, what in timeline.events) and time.monotonic() < deadline:
            time.sleep(0.01)
        store.ensure(JobSpec("k", "short", {}, code_version(), "short"), VISITOR)
        assert timeline.visitor_started.wait(10)
        time.sleep(0.5)  # the server's run is paused meanwhile, and its page says so
        assert store.get(server_run.id).stage == PAUSED and store.get(server_run.id).state == "running"
        timeline.release_visitor.set()
        deadline = time.monotonic() + 20
        while store.get(server_run.id).state != "done" and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    assert store.get(server_run.id).state == "done"
    start = next(t for t, what in timeline.events if what == "visitor start")
    end = next(t for t, what in timeline.events if what == "visitor end")
    during = [t for t, what in timeline.events if what == "server step" and start + 0.15 < t < end]
    assert during == []  # at most the step it was in when the visitor's run began (unpaused: ~30 steps)
    assert sum(what == "server step" for _, what in timeline.events) == 150  # resumed: every step ran once
    assert any(what == "server step" and t > end for t, what in timeline.events)


def test_the_start_up_runner_claims_nothing_while_a_lane_is_busy(tmp_path):
    store = open_job_backend(tmp_path / "data")
    busy = Lanes()
    task = job_tasks.task("t", lambda params, progress: "ok")
    runner = JobRunner(store, {"t": task}, whose="server", activity=busy, yields=True)
    store.ensure(JobSpec("k", "t", {}, code_version(), "t"), SERVERS)
    busy.enter()
    assert runner.run_one() is False and store.listing()[0].state == "queued"
    busy.leave()
    assert busy.wait_idle(0) and runner.run_one() is True and store.listing()[0].state == "done"


def test_a_page_says_where_a_default_run_waits(tmp_path):
    client = JobClient()
    store = open_job_backend(tmp_path / "data")
    make = lambda name, lane: job_tasks.task(name, lane=lane)  # noqa: E731
    client.configure(store, {"a": make("a", "short"), "b": make("b", "real"), "c": make("c", "long")}, "off")
    try:
        first = client.submit(job_tasks.job("a"), SERVERS)
        time.sleep(0.01)
        second = client.submit(job_tasks.job("b"), SERVERS)
        time.sleep(0.01)
        mine = client.submit(job_tasks.job("c"), VISITOR)
        assert client.ahead(client.status(first.id)) == 1  # the visitor's run goes first
        assert client.ahead(client.status(second.id)) == 2  # the visitor's and the older default run
        assert client.ahead(client.status(mine.id)) == 0  # nothing of its lane: defaults never hold it up
    finally:
        client.shutdown()
