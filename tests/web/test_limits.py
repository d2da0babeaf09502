"""Limits at the edge (docs/reference/configuration.md "Limits"): header size (431) and header timeout (408, or a plain
close of a silent connection), keep-alive idle close, request bodies over the cap refused (413)
once the rest has been drained (unread from a Content-Length when the client waits for
`100 Continue`; a sender that goes silent answered after the header timeout), cut at the cap
for the app while streaming, and /healthz answering while every compute slot and the waiting
line are taken. Real clients' uploads over the cap: tests/web/test_upload_drain.py.

The socket tests run against the real server (`python -m app`): the header limits live in its
HTTP protocol, not in the app. Time bounds here are generous hang guards, not measurements: the
measured figures are printed (and the overload figures are tests/web/test_overload.py's).
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest
from live_server import running_server
from reporting import report
from run_async import run_async

from app.domain.uploads import MAX_BYTES
from app.house import create_app, registry
from app.web.middleware.limits import MULTIPART_OVERHEAD
from app.web.settings import Settings

# The default app's transport caps: the largest file its kinds open, and that plus a form's overhead.
MAX_UPLOAD_BYTES = registry().upload_limit
UPLOAD_BODY_LIMIT = MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD

HEADER_TIMEOUT_S = 1.0
KEEP_ALIVE_S = 1
BOUND_S = 10.0  # a hang guard: every refusal below comes in milliseconds on an idle machine


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    spool = tmp / "spool"
    spool.mkdir()
    env = {"HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S), "KEEP_ALIVE_S": str(KEEP_ALIVE_S), "TMPDIR": str(spool)}
    with running_server(tmp, "--device", "cpu", "--log-level", "warning", env=env) as srv:
        srv.spool = spool  # type: ignore[attr-defined]
        yield srv


def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=BOUND_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_all(sock: socket.socket) -> tuple[bytes, str]:
    """Everything until the server closes: (bytes, how it ended: 'eof' or 'reset')."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        return data, "reset"
    return data, "eof"


def status_of(data: bytes) -> int:
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    return int(data.split(b" ", 2)[1])


def healthy(server) -> float:
    t0 = time.perf_counter()
    assert httpx.get(server.url + "/healthz", timeout=BOUND_S).status_code == 200
    return time.perf_counter() - t0


def spooled(server) -> list[str]:
    return [f"{p.name}: {p.stat().st_size}" for p in server.spool.rglob("*") if p.is_file()]


# -- headers -------------------------------------------------------------------------------

def test_a_64_mb_header_is_refused_431_at_the_cap(server, request):
    sock = connect(server)
    sent = 0
    health: list[float] = []

    def send():
        nonlocal sent
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Huge: ")
            chunk = b"a" * 65536
            for _ in range(1024):  # 64 MB, never terminated
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server stopped reading: what we want

    t0 = time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    health.append(healthy(server))  # another client, while the huge head streams in
    data, _ = read_all(sock)
    refused_s = time.perf_counter() - t0
    sender.join(BOUND_S)
    sock.close()
    health.append(healthy(server))
    report(request, f"limits: 64 MB header -> {status_of(data)} in {refused_s * 1000:.0f} ms after "
                    f"{sent / 1e6:.1f} MB sent; /healthz meanwhile {max(health) * 1000:.0f} ms")
    assert status_of(data) == 431 and b"connection: close" in data.lower()
    # (the rest of the 64 MB may still go out: the server drains and drops it for LINGER_S, so
    # its close cannot reset the connection before the 431 is read)
    assert refused_s < BOUND_S, refused_s


def test_a_head_under_the_cap_is_served(server):
    headers = {f"x-pad-{i}": "b" * 1000 for i in range(40)}  # 40 KB of headers: under 64 KiB
    assert httpx.get(server.url + "/healthz", headers=headers, timeout=BOUND_S).status_code == 200


def test_a_silent_connection_is_closed_after_the_header_timeout(server, request):
    sock = connect(server)
    t0 = time.perf_counter()
    data, _ = read_all(sock)
    closed_s = time.perf_counter() - t0
    report(request, f"limits: silent connection closed after {closed_s:.2f} s (HEADER_TIMEOUT_S={HEADER_TIMEOUT_S})")
    assert data == b"" and HEADER_TIMEOUT_S * 0.9 <= closed_s < HEADER_TIMEOUT_S + BOUND_S


def test_a_head_sent_too_slowly_gets_408(server):
    sock = connect(server)
    t0 = time.perf_counter()
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
    for _ in range(3):  # trickling bytes does not reset the clock
        time.sleep(HEADER_TIMEOUT_S / 3)
        try:
            sock.sendall(b"X-Slow: 1\r\n")
        except OSError:
            break
    data, _ = read_all(sock)
    assert status_of(data) == 408 and time.perf_counter() - t0 < HEADER_TIMEOUT_S + BOUND_S


def test_an_idle_keep_alive_connection_is_closed(server):
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    t0 = time.perf_counter()
    data, _ = read_all(sock)  # the answer, then the close once idle for KEEP_ALIVE_S
    assert status_of(data) == 200 and b'{"status":"ok"}' in data
    assert KEEP_ALIVE_S * 0.9 <= time.perf_counter() - t0 < KEEP_ALIVE_S + BOUND_S


# -- bodies --------------------------------------------------------------------------------

MULTIPART_HEAD = (b'--bnd\r\nContent-Disposition: form-data; name="file"; filename="big.json"\r\n'
                  b"Content-Type: application/json\r\n\r\n")


def test_a_300_mb_body_waiting_for_100_continue_is_refused_unread(server, request):
    sock = connect(server)
    t0 = time.perf_counter()
    sock.sendall(b"POST /api/walkthroughs HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=bnd\r\n"
                 b"Expect: 100-continue\r\nContent-Length: 314572800\r\n\r\n")
    data, ended = read_all(sock)  # no body sent: the answer cannot wait for it
    refused_s = time.perf_counter() - t0
    report(request, f"limits: 300 MB Content-Length, Expect: 100-continue -> {status_of(data)} in "
                    f"{refused_s * 1000:.1f} ms, nothing sent, connection {ended}")
    assert status_of(data) == 413 and b"connection: close" in data.lower() and b"upload limit" in data
    assert b"100 Continue" not in data and ended == "eof"
    assert refused_s < BOUND_S
    assert not spooled(server), spooled(server)
    healthy(server)


def test_a_300_mb_body_whose_sender_goes_silent_is_refused_after_the_header_timeout(server, request):
    sock = connect(server)
    t0 = time.perf_counter()
    sock.sendall(b"POST /api/walkthroughs HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=bnd\r\n"
                 b"Content-Length: 314572800\r\n\r\n" + MULTIPART_HEAD + b"{" * 1000)
    data, ended = read_all(sock)  # we send nothing more: the drain gives up after HEADER_TIMEOUT_S idle
    refused_s = time.perf_counter() - t0
    report(request, f"limits: 300 MB Content-Length, 1 KB sent then silence -> {status_of(data)} in "
                    f"{refused_s * 1000:.0f} ms (HEADER_TIMEOUT_S={HEADER_TIMEOUT_S}), connection {ended}")
    assert status_of(data) == 413 and b"connection: close" in data.lower() and b"upload limit" in data
    assert refused_s < HEADER_TIMEOUT_S + BOUND_S
    assert not spooled(server), spooled(server)
    healthy(server)


def test_a_body_on_a_route_that_takes_none_is_capped_too(server):
    response = httpx.post(server.url + "/healthz", content=b"x" * (65 * 1024), timeout=BOUND_S)
    assert response.status_code == 413 and response.headers["connection"] == "close"


def test_a_chunked_upload_is_cut_at_the_cap_and_answered_after_its_end(server, request):
    sock = connect(server)
    sock.sendall(b"POST /api/walkthroughs HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=bnd\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(MULTIPART_HEAD), MULTIPART_HEAD))
    sent = 0
    chunk = b"10000\r\n" + b"{" * 65536 + b"\r\n"
    t0 = time.perf_counter()
    while sent < UPLOAD_BODY_LIMIT + 8 * 1024 * 1024:  # past the cap: no answer comes before the end
        sock.sendall(chunk)
        sent += 65536
    sock.sendall(b"0\r\n\r\n")
    data, ended = read_all(sock)
    report(request, f"limits: chunked upload -> {status_of(data)} after {sent / 1e6:.1f} MB sent "
                    f"(cap {UPLOAD_BODY_LIMIT / 1e6:.2f} MB) in {(time.perf_counter() - t0) * 1000:.0f} ms, "
                    f"connection {ended}")
    assert status_of(data) == 413 and b"upload limit" in data and ended == "eof"
    # (the multipart parser saw only the cap: BodyLimitMiddleware dropped the rest, test_upload_drain.py)
    assert not spooled(server), spooled(server)
    healthy(server)


def test_an_upload_under_the_cap_still_gets_the_routes_own_answer(make_client):
    client = make_client()
    response = client.post("/api/walkthroughs", files={"file": ("big.json", b"{" * (MAX_UPLOAD_BYTES + 1))})
    assert response.status_code == 413  # read_capped's refusal: the body is under the transport's cap
    assert "32 MB" in response.json()["error"] and "2 MB" in response.json()["error"]
    snapshot = client.post("/api/walkthroughs", files={"file": ("big.json", b"{" * (MAX_BYTES + 1))})
    assert snapshot.status_code == 413 and "2 MB" in snapshot.json()["error"]  # the store's, for a snapshot
    assert client.post("/api/walkthroughs", files={"file": ("bad.json", b"{")}).status_code == 422


def test_a_streamed_body_over_the_cap_gets_413_in_process(make_client):
    client = make_client()

    def stream():
        yield b"--bnd\r\n" + MULTIPART_HEAD[7:]
        for _ in range(UPLOAD_BODY_LIMIT // 65536 + 16):
            yield b"{" * 65536

    headers = {"content-type": "multipart/form-data; boundary=bnd"}
    api = client.post("/api/walkthroughs", content=stream(), headers=headers)
    assert api.status_code == 413 and "upload limit" in api.json()["error"]
    page = client.post("/walkthroughs/new", content=stream(), headers=headers)
    assert page.status_code == 413 and "text/html" in page.headers["content-type"] and "upload limit" in page.text
    assert page.headers["content-security-policy"]  # inside the security headers


# -- compute -------------------------------------------------------------------------------

def test_healthz_answers_while_every_compute_slot_and_the_queue_are_full(tmp_path, request):
    app = create_app(Settings(device="cpu", uploads_dir=tmp_path, compute_slots=1, compute_queue=1,
                              compute_wait_s=30, response_cache_mb=0))
    limiter = app.state.context.limiter  # this app's slots, shared with no other app
    held, release = threading.Event(), threading.Event()

    def hold_the_slot():
        with limiter:
            held.set()
            release.wait(60)

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as client:
            waiting = asyncio.create_task(client.get("/api/walkthroughs/toy_grpo/step?seed=7100"))
            while limiter.waiting < 1:  # the one waiting place taken
                await asyncio.sleep(0.01)
            busy = await client.get("/api/walkthroughs/toy_grpo/step?seed=7101")
            t0 = time.perf_counter()
            health = await client.get("/healthz")
            health_s = time.perf_counter() - t0
            listing = await client.get("/api/walkthroughs")
            release.set()
            return await waiting, busy, health, health_s, listing

    holder = threading.Thread(target=hold_the_slot)
    try:
        holder.start()
        assert held.wait(BOUND_S)
        waited, busy, health, health_s, listing = run_async(scenario())
        report(request, f"limits: /healthz with the slot and the queue full: {health_s * 1000:.1f} ms")
        assert health.status_code == 200 and listing.status_code == 200
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert health_s < BOUND_S
        assert waited.status_code == 200  # it got the slot once released
    finally:
        release.set()
        holder.join(BOUND_S)
        app.state.compute.shutdown()
