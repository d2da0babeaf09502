"""An over-limit upload gets its 413, never a connection reset (issue 23).

Both of uvicorn's protocols close the connection as soon as a `Connection: close` answer is
written; with request bytes still unread the kernel then resets it, and a client that writes its
whole body before reading (`urllib`, `requests`) sees ECONNRESET or a broken pipe, not the 413.
BodyLimitMiddleware reads and drops the rest of such a body first (`drain`, bounded), and only
then answers. Here: the order of the middleware's reads and its answer (a plain ASGI harness),
then real clients against the real server (`python -m app` on loopback). No timing is asserted:
time bounds are hang guards.
"""
from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest
import requests
from live_server import running_server
from reporting import report
from run_async import run_async
from snapshots import seed_dict

from app.domain.uploads import MB
from app.house import registry
from app.web.middleware import limits
from app.web.middleware.limits import DRAIN_MAX_BYTES, MULTIPART_OVERHEAD, BodyLimitMiddleware

# The default app's transport caps: the largest file its kinds open, and that plus a form's overhead.
MAX_UPLOAD_BYTES = registry().upload_limit
UPLOAD_BODY_LIMIT = MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD

# real server processes under load: `make test-slower`, alone (serial), after its parallel phase
pytestmark = [pytest.mark.slower_tier, pytest.mark.serial]

BOUND_S = 60.0  # a hang guard, not a measurement
HEAD = (b'--bnd\r\nContent-Disposition: form-data; name="file"; filename="big.json"\r\n'
        b"Content-Type: application/json\r\n\r\n")
TAIL = b"\r\n--bnd--\r\n"
CONTENT_TYPE = "multipart/form-data; boundary=bnd"
OVER_CAP = MAX_UPLOAD_BYTES + MB  # a file just over the transport's cap


def multipart_chunks(file_bytes: int, chunk: int = MB):
    """A one-file multipart body, `chunk` bytes at a time: never held whole."""
    yield HEAD
    block = b"{" * chunk
    for start in range(0, file_bytes, chunk):
        yield block[:min(chunk, file_bytes - start)]
    yield TAIL


def multipart_length(file_bytes: int) -> int:
    return len(HEAD) + file_bytes + len(TAIL)


# -- the middleware alone ------------------------------------------------------------------

def run_middleware(headers: dict[bytes, bytes], chunks, chunk_size: int, inner=None, cap: int = 10 * MB):
    """Drive BodyLimitMiddleware (cap `cap`) with `chunks` body messages; returns the log of what
    happened in order ("recv" per message taken, ("send", status) per answer) and what the app read."""
    log: list = []
    seen = {"bytes": 0}

    async def app(scope, receive, send):  # a multipart parser: reads the body to its end
        while True:
            message = await receive()
            seen["bytes"] += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def scenario():
        remaining = iter(range(chunks))

        async def receive():
            i = next(remaining, None)
            if i is None:
                raise AssertionError("read past the end of the body")
            log.append("recv")
            return {"type": "http.request", "body": b"x" * chunk_size, "more_body": i < chunks - 1}

        async def send(message):
            if message["type"] == "http.response.start":
                log.append(("send", message["status"]))

        scope = {"type": "http", "method": "POST", "path": "/api/walkthroughs",
                 "headers": list(headers.items())}
        await BodyLimitMiddleware(inner or app, 64 * 1024, upload_limit=cap - MULTIPART_OVERHEAD,
                                  upload_limits="test")(scope, receive, send)

    run_async(scenario())
    return log, seen["bytes"]


def test_a_declared_body_over_the_cap_is_read_to_its_end_before_the_413():
    length = 40 * MB
    log, seen = run_middleware({b"content-length": str(length).encode()}, 40, MB)
    assert seen == 0  # the app never saw it
    assert log == ["recv"] * 40 + [("send", 413)]


def test_a_counted_body_is_cut_at_the_cap_for_the_app_and_drained_before_the_413():
    log, seen = run_middleware({b"transfer-encoding": b"chunked"}, 40, MB)
    assert seen <= 10 * MB  # the app (and its spool) got no more than the cap
    assert log == ["recv"] * 40 + [("send", 413)]
    log, seen = run_middleware({b"transfer-encoding": b"chunked"}, 8, MB)  # under the cap: the app's answer
    assert seen == 8 * MB and log == ["recv"] * 8 + [("send", 200)]


def test_expect_100_continue_or_a_length_past_the_drain_bound_is_answered_unread():
    waiting = {b"content-length": str(40 * MB).encode(), b"expect": b"100-continue"}
    assert run_middleware(waiting, 40, MB) == ([("send", 413)], 0)  # it sent nothing: no 100, no read
    beyond = {b"content-length": str(DRAIN_MAX_BYTES + 1).encode()}
    assert run_middleware(beyond, 40, MB) == ([("send", 413)], 0)


def test_the_drain_stops_at_its_byte_bound():
    chunks = DRAIN_MAX_BYTES // MB + 64  # the body goes on past the bound
    log, _ = run_middleware({b"transfer-encoding": b"chunked"}, chunks, MB)
    assert log[-1] == ("send", 413) and DRAIN_MAX_BYTES // MB <= log.count("recv") < chunks


def test_a_silent_sender_is_answered_after_the_idle_bound(monkeypatch):
    monkeypatch.setattr(limits, "header_timeout_s", lambda: 0.05)
    log: list = []

    async def scenario():
        calls = 0

        async def receive():
            nonlocal calls
            calls += 1
            if calls > 1:
                await asyncio.Event().wait()  # silent from now on
            log.append("recv")
            return {"type": "http.request", "body": b"x" * 1024, "more_body": True}

        async def send(message):
            if message["type"] == "http.response.start":
                log.append(("send", message["status"]))

        scope = {"type": "http", "method": "POST", "path": "/api/walkthroughs",
                 "headers": [(b"content-length", str(300 * MB).encode())]}
        await BodyLimitMiddleware(None, 64 * 1024, MAX_UPLOAD_BYTES,  # type: ignore[arg-type]
                                  registry().upload_limits)(scope, receive, send)

    run_async(scenario())
    assert log == ["recv", ("send", 413)]


# -- real clients, real server -------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drain")
    # One compute slot and no waiting line: a drain holding a slot would make a compute route 503.
    env = {"COMPUTE_SLOTS": "1", "COMPUTE_QUEUE": "0"}
    with running_server(tmp, "--device", "cpu", "--log-level", "warning", env=env) as srv:
        yield srv


def by_urllib(url: str, data, headers: dict[str, str] | None = None) -> tuple[str, bytes, str]:
    """(status or the error's name, body, content type)."""
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": CONTENT_TYPE, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=BOUND_S) as response:
            return str(response.status), response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as error:
        return str(error.code), error.read(), error.headers.get("content-type", "")
    except OSError as error:  # URLError wraps the reset or broken pipe
        return f"{type(error).__name__}: {getattr(error, 'reason', error)}", b"", ""


def by_requests(url: str, data, headers: dict[str, str] | None = None) -> tuple[str, bytes, str]:
    try:
        response = requests.post(url, data=data, headers={"Content-Type": CONTENT_TYPE, **(headers or {})},
                                 timeout=BOUND_S)
    except requests.RequestException as error:
        return f"{type(error).__name__}: {error}", b"", ""
    return str(response.status_code), response.content, response.headers.get("content-type", "")


CLIENTS = {"urllib": by_urllib, "requests": by_requests}


def logged_no_error(server) -> bool:
    """Nothing 5xx: the server logged no exception from the app or its protocol."""
    log = server.log()
    return "Traceback" not in log and "Exception in ASGI application" not in log


def refused_for_size(outcome: tuple[str, bytes, str], phrase: str = "upload limit") -> bool:
    status, body, content_type = outcome
    return (status == "413" and content_type == "application/json"
            and phrase in json.loads(body)["error"])


def test_uploads_just_over_the_cap_all_get_their_413(server, request):
    body = b"".join(multipart_chunks(OVER_CAP))
    assert len(body) > UPLOAD_BODY_LIMIT
    for name, post in CLIENTS.items():
        outcomes = [post(server.url + "/api/walkthroughs", body) for _ in range(30)]
        tally = Counter(o[0] for o in outcomes)
        report(request, f"drain: 30 uploads of {len(body) / MB:.1f} MB by {name}: {dict(tally)}")
        assert all(refused_for_size(o) for o in outcomes), tally
        assert "32 MB" in json.loads(outcomes[0][1])["error"]
    for post in CLIENTS.values():  # the form's route answers its page
        outcomes = [post(server.url + "/walkthroughs/new", body) for _ in range(5)]
        assert all(o[0] == "413" and o[2].startswith("text/html") and b"upload limit" in o[1]
                   for o in outcomes), Counter(o[0] for o in outcomes)
    assert logged_no_error(server), server.log()[-3000:]


def test_a_300_mb_record_gets_413_not_a_reset(server, request):
    size = 300 * MB
    declared = by_urllib(server.url + "/api/walkthroughs", multipart_chunks(size),
                         {"Content-Length": str(multipart_length(size))})
    chunked = by_requests(server.url + "/api/walkthroughs", multipart_chunks(size))  # no length: counted
    report(request, f"drain: 300 MB by urllib (Content-Length) -> {declared[0]}, "
                    f"by requests (chunked) -> {chunked[0]}")
    assert refused_for_size(declared), declared[0]
    assert refused_for_size(chunked), chunked[0]
    assert requests.get(server.url + "/healthz", timeout=BOUND_S).status_code == 200
    assert logged_no_error(server), server.log()[-3000:]


def test_a_3_mb_snapshot_gets_the_stores_413_naming_2_mb(server):
    doc = seed_dict()
    doc["padding"] = "x" * (3 * MB)
    raw = json.dumps(doc).encode()
    body = HEAD.replace(b"big.json", b"big.tensorviz.json") + raw + TAIL
    assert len(body) < UPLOAD_BODY_LIMIT  # under the transport's cap: the store refuses it
    for post in CLIENTS.values():
        outcomes = [post(server.url + "/api/walkthroughs", body) for _ in range(5)]
        assert all(refused_for_size(o, "2 MB") for o in outcomes), [(o[0], o[1][:200]) for o in outcomes]
        assert "upload limit" not in json.loads(outcomes[0][1])["error"]  # the store's words, not the transport's


def test_a_drain_holds_no_compute_slot_and_leaves_the_server_serving(server):
    size = 300 * MB
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=BOUND_S)
    chunks = multipart_chunks(size)
    sock.sendall(b"POST /api/walkthroughs HTTP/1.1\r\nHost: t\r\nContent-Type: " + CONTENT_TYPE.encode()
                 + b"\r\nContent-Length: %d\r\n\r\n" % multipart_length(size))
    sent = 0
    while sent < UPLOAD_BODY_LIMIT + 8 * MB:  # past the cap: the server is draining, not answering
        chunk = next(chunks)
        sock.sendall(chunk)
        sent += len(chunk)
    t0 = time.perf_counter()
    assert requests.get(server.url + "/healthz", timeout=BOUND_S).status_code == 200
    tensors = requests.get(server.url + "/api/walkthroughs/toy_grpo/step?seed=7300", timeout=BOUND_S)
    assert tensors.status_code == 200, tensors.text[:300]  # its one slot was free: 503 otherwise
    assert time.perf_counter() - t0 < BOUND_S
    for chunk in chunks:
        sock.sendall(chunk)
    data, ended = b"", "eof"
    try:
        while part := sock.recv(65536):
            data += part
    except ConnectionResetError:
        ended = "reset"
    sock.close()
    assert data.startswith(b"HTTP/1.1 413 ") and b"upload limit" in data and ended == "eof", (ended, data[:300])
    assert logged_no_error(server), server.log()[-3000:]
