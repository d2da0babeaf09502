"""The compute executor's worker processes (app/web/compute_pool.py, issue 21).

In this process: what crosses to a worker and back (responses as bytes, exceptions that keep
their class and attributes, so the error handlers answer as before) and the slot gate's
waiting line. On the real server (`python -m app`, whose default is the process pool): a step
page, a tensors request, 404s, a 422 and prompt 503s all answered through the workers, with
the same bytes as the in-process (thread) executor of a TestClient app, and a killed worker
replaced.
"""
from __future__ import annotations

import asyncio
import os
import pickle
import signal
import time
from pathlib import Path

import httpx
import pytest
from fastapi.exceptions import RequestValidationError
from live_server import running_server
from run_async import run_async
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, RedirectResponse, StreamingResponse

from app.domain.uploads import UploadRejected
from app.engine.runtime.compute import ComputeBusy
from app.kinds.toy.engine.step import TrainingDiverged
from app.web.compute_pool import Finished, _portable, finished, rebuild
from app.web.errors import NotFound, NotRunnable
from app.web.executor import SlotGate

# real server processes under load: `make test-slower`, alone (serial), after its parallel phase
pytestmark = [pytest.mark.slower_tier, pytest.mark.serial]

STEP_PAGE = "/walkthroughs/toy_grpo/steps/clip"
TENSORS = "/api/walkthroughs/toy_grpo/step?step=clip&seed=4242"
HEAVY = "/api/walkthroughs/toy_grpo/step?group_size=4096&seed={}"


# -- what crosses the process boundary ------------------------------------------------------

@pytest.mark.parametrize("exc", [
    NotFound("unknown step 'x'"), NotRunnable("view-only"), ComputeBusy("busy"), TrainingDiverged("NaN"),
    UploadRejected(413, "too big"),
    RequestValidationError([{"loc": ("query", "seed"), "type": "int_parsing", "msg": "not an int"}]),
    HTTPException(status_code=404, detail="nope", headers={"X-A": "1"}),  # keyword-only: no args to rebuild from
], ids=lambda e: type(e).__name__)
def test_exceptions_cross_with_their_class_and_attributes(exc):
    back = pickle.loads(pickle.dumps(_portable(exc)))
    assert type(back) is type(exc) and str(back) == str(exc)
    assert {k: v for k, v in vars(back).items()} == {k: v for k, v in vars(exc).items()}
    if isinstance(exc, RequestValidationError):
        assert back.errors() == exc.errors()


def test_an_exception_that_cannot_cross_becomes_a_runtime_error_naming_it():
    class Local(Exception):  # a class pickle cannot find by name
        pass
    portable = _portable(Local("boom"))
    assert type(portable) is RuntimeError and "Local: boom" in str(portable)
    pickle.loads(pickle.dumps(portable))


def test_responses_cross_as_their_bytes():
    response = JSONResponse({"a": 1}, status_code=201, headers={"Vary": "Accept-Encoding"})
    sent = pickle.loads(pickle.dumps(finished(response)))
    assert isinstance(sent, Finished)
    again = rebuild(sent)
    assert (again.status_code, again.body, again.raw_headers) == (201, response.body, response.raw_headers)
    redirect = rebuild(finished(RedirectResponse("/x?y=1", status_code=303)))
    assert redirect.status_code == 303 and redirect.headers["location"] == "/x?y=1"
    assert finished({"plain": "dict"}) == {"plain": "dict"}  # anything else crosses as it is
    with pytest.raises(TypeError):
        finished(StreamingResponse(iter([b"x"])))


def test_slot_gate_serves_in_order_and_gives_up_after_its_wait():
    async def scenario():
        gate = SlotGate(1, wait_s=0.3)
        await gate.acquire()
        order = []

        async def waiter(name):
            await gate.acquire()
            order.append(name)
            gate.release()
        first, second = asyncio.create_task(waiter("first")), asyncio.create_task(waiter("second"))
        await asyncio.sleep(0.05)
        gate.release()
        await asyncio.gather(first, second)
        await gate.acquire()  # held again: the next one waits 0.3 s, then is refused
        t0 = time.perf_counter()
        with pytest.raises(ComputeBusy):
            await gate.acquire()
        waited = time.perf_counter() - t0
        gate.release()
        await gate.acquire()  # the refused waiter left no slot behind, nor took one
        return order, waited, gate.free
    order, waited, free = run_async(scenario())
    assert order == ["first", "second"] and 0.25 <= waited < 2 and free == 0


# -- through the real server's worker processes ---------------------------------------------

def worker_pids(server_pid: int) -> list[int]:
    """The server's spawned compute workers (its children running multiprocessing's spawn_main)."""
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
            cmdline = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next(int(line.split()[1]) for line in text.splitlines() if line.startswith("PPid:"))
        if ppid == server_pid and b"spawn_main" in cmdline:
            pids.append(int(status.parent.name))
    return pids


def test_pages_and_api_answer_through_the_worker_processes(tmp_path, make_client):
    in_process = make_client(follow_redirects=False)  # the thread executor: the same answers, byte for byte
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning") as server:
        async def first_seconds():  # /healthz answers before the workers are up: these wait for them
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                return await asyncio.gather(*(client.get(f"{TENSORS}{seed}") for seed in range(16)))
        assert [a.status_code for a in run_async(first_seconds())] == [200] * 16
        with httpx.Client(base_url=server.url, timeout=60) as client:
            page = client.get(STEP_PAGE)
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assert page.text == in_process.get(STEP_PAGE).text
            fragment = client.get(STEP_PAGE, headers={"HX-Request": "true"})
            assert fragment.status_code == 200 and fragment.headers["hx-push-url"]
            tensors = client.get(TENSORS)
            assert tensors.status_code == 200 and tensors.headers["content-encoding"] == "gzip"
            assert tensors.json() == in_process.get(TENSORS).json()
            for url in (STEP_PAGE + "?seed=3", STEP_PAGE + "?expanded=&seed=3&x=1", "/walkthroughs/toy_grpo/steps/clip?node=zzz"):
                assert client.get(url).status_code == in_process.get(url).status_code, url
            missing = client.get("/walkthroughs/toy_grpo/steps/nope")  # NotFound raised in a worker
            assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
            refused = client.get(STEP_PAGE + "?learning_rate=abc")  # the refused form, drawn in a worker
            assert refused.status_code == 422 and "learning_rate" in refused.text
            tokens = client.get("/api/walkthroughs/tiny_lm_grpo/step?seed=5")
            assert tokens.status_code == 200 and tokens.json()["walkthrough"] == "tiny_lm_grpo"
        workers = worker_pids(server.proc.pid)
        assert len(workers) == 2, workers  # COMPUTE_SLOTS worker processes: `python -m app`'s default
        assert all(os.getpriority(os.PRIO_PROCESS, pid) >= 10 for pid in workers)  # niced below the server
        assert "Traceback" not in server.log(), server.log()[-3000:]


def test_a_full_pool_answers_503_with_retry_after_at_once(tmp_path):
    env = {"COMPUTE_SLOTS": "1", "COMPUTE_QUEUE": "1", "COMPUTE_WAIT_S": "0.05", "RESPONSE_CACHE_MB": "0"}
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning", env=env) as server:
        assert httpx.get(server.url + HEAVY.format(1), timeout=60).status_code == 200  # the worker is up

        async def burst():
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                return await asyncio.gather(*(client.get(HEAVY.format(seed)) for seed in range(100, 108)))
        answers = run_async(burst())
        codes = sorted(a.status_code for a in answers)
        assert set(codes) == {200, 503}, codes  # one place computing, the rest refused or timed out
        for busy in (a for a in answers if a.status_code == 503):
            assert busy.headers["retry-after"] == "1" and busy.json()["error"].startswith("busy:")
            assert busy.elapsed.total_seconds() < 5  # never a long wait


def test_a_killed_worker_is_replaced(tmp_path):
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning") as server:
        assert httpx.get(server.url + HEAVY.format(1), timeout=60).status_code == 200
        for pid in worker_pids(server.proc.pid):
            os.kill(pid, signal.SIGKILL)
        codes = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            codes.append(httpx.get(server.url + HEAVY.format(len(codes) + 2), timeout=60).status_code)
            if codes[-1] == 200:
                break
            time.sleep(0.2)
        assert codes[-1] == 200 and set(codes) <= {200, 503}, codes  # a 503 while the pool restarts, at most
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
