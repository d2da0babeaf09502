"""Faults: a missing device, bad files at start-up, crashes inside a request, and the
security headers on every kind of response."""
from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time

import httpx
import pytest
import torch
from csp import csp_directives
from fastapi.testclient import TestClient
from live_server import free_port, running_server
from paths import ROOT
from snapshots import SEED_PATH

from app.house import create_app
from app.web.settings import Settings

# real server processes under load: `make test-slower`, alone (serial), after its parallel phase
pytestmark = [pytest.mark.slower_tier, pytest.mark.serial]

CUDA = torch.cuda.is_available()


# -- the device ------------------------------------------------------------------------------

def test_device_cuda_without_cuda_exits_with_a_message(tmp_path):
    if CUDA:  # on a GPU machine the same flag must start and compute on the GPU
        with running_server(tmp_path, "--device", "cuda") as server:
            assert httpx.get(server.url + "/api/walkthroughs/toy_grpo/step").json()["device"] == "cuda"
        return
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "app", "--device", "cuda", "--port", str(free_port())],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert time.monotonic() - t0 < 30, "fails fast, before serving"
    assert "cuda" in done.stderr.lower() and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().startswith("error:"), done.stderr


def test_device_auto_starts_and_reports_what_it_chose(tmp_path):
    with running_server(tmp_path, "--device", "auto") as server:
        body = httpx.get(server.url + "/api/walkthroughs/toy_grpo/step", timeout=30).json()
        assert body["device"] == ("cuda" if CUDA else "cpu")


def test_port_in_use_exits_non_zero(tmp_path):
    with running_server(tmp_path, "--device", "cpu") as server:
        done = subprocess.run([sys.executable, "-m", "app", "--device", "cpu", "--port", str(server.port)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert "address already in use" in (done.stderr + done.stdout).lower()
        assert httpx.get(server.url + "/healthz").status_code == 200, "the first server is unharmed"


def test_sigterm_stops_the_server_cleanly(tmp_path):
    with running_server(tmp_path, "--device", "cpu") as server:
        server.proc.terminate()
        # uvicorn shuts down gracefully, then re-raises the signal (exit status -SIGTERM)
        assert server.proc.wait(timeout=15) in (0, -15)
        assert "Finished server process" in server.log() and "Traceback" not in server.log(), server.log()[-2000:]


# -- bad files at start-up -----------------------------------------------------------------------

def test_corrupt_walkthrough_at_startup_is_listed_and_logged(tmp_path):
    folder = tmp_path / "walkthroughs"
    folder.mkdir()
    shutil.copy(SEED_PATH, folder / SEED_PATH.name)
    (folder / "corrupt.json").write_bytes(SEED_PATH.read_bytes()[:5000])
    (folder / "wrong.tensorviz.json").write_text('{"format": "tensorviz.graph", "version": 7}')
    with running_server(tmp_path, "--device", "cpu", env={"WALKTHROUGHS_DIR": str(folder)}) as server:
        items = {w["id"]: w for w in httpx.get(server.url + "/api/walkthroughs").json()}
        assert items["corrupt"]["error"].startswith("corrupt.json: $: not valid JSON")
        assert items["wrong"]["error"].startswith("wrong.tensorviz.json: version: ")
        assert items["toy_grpo"]["error"] is None
        assert httpx.get(server.url + "/api/walkthroughs/toy_grpo/step?step=clip", timeout=30).status_code == 200
        assert httpx.get(server.url + "/").status_code == 200
        log = server.log()
        assert "corrupt.json: $: not valid JSON" in log and "wrong.tensorviz.json: version" in log, log[-2000:]


def test_missing_walkthroughs_folder_gives_a_clear_503_page(tmp_path):
    app = create_app(Settings(device="cpu", walkthroughs_dir=tmp_path / "nope", uploads_dir=tmp_path / "up"))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/api/walkthroughs").json() == []
        home = client.get("/")
        assert home.status_code == 503 and "No walkthrough loaded" in home.text
        assert home.headers["cache-control"] == "no-store"  # a CDN must not keep it
        assert client.get("/healthz").status_code == 200


# -- crashes inside a request --------------------------------------------------------------------

@pytest.fixture
def crashing_client(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom in /work/main/app/secret_module.py line 42")

    monkeypatch.setattr("app.kinds.toy.engine.select.run_grpo_step", boom)
    app = create_app(Settings(device="cpu", uploads_dir=tmp_path / "up"))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


LEAKS = ("Traceback", "boom", "secret_module", "/work/", ".py", 'File "')


@pytest.mark.parametrize("path, kind", [
    ("/api/walkthroughs/toy_grpo/step?seed=4242", "json"),
    ("/walkthroughs/toy_grpo/steps/clip?seed=4243", "html"),
])
def test_a_crash_is_a_500_without_internals_and_is_logged(crashing_client, caplog, path, kind):
    with caplog.at_level(logging.ERROR):
        response = crashing_client.get(path, headers={"HX-Request": "true"} if kind == "html" else {})
    assert response.status_code == 500
    for leak in LEAKS:
        assert leak not in response.text, f"{leak!r} leaked to the client: {response.text[:300]}"
    if kind == "json":
        assert response.json() == {"error": "internal error; it has been logged"}
    else:
        assert "text/html" in response.headers["content-type"]
        # sent outside every middleware: the error page itself says no-store
        assert response.headers["cache-control"] == "no-store"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert path.split("?")[0] in logged, logged
    assert any(r.exc_info and "boom" in str(r.exc_info[1]) for r in caplog.records), "the cause is logged"
    assert_security_headers(response)


# -- security headers everywhere -------------------------------------------------------------------



def assert_security_headers(response, page: bool = True) -> None:
    where = f"{response.request.method} {response.request.url} -> {response.status_code}"
    headers = response.headers
    assert headers.get("x-content-type-options") == "nosniff", where
    assert headers.get("referrer-policy"), where
    csp = headers.get("content-security-policy")
    assert csp, f"no CSP on {where}"
    directives = csp_directives(csp)
    script = directives.get("script-src", directives.get("default-src"))
    assert script is not None and "'unsafe-inline'" not in script and "'unsafe-eval'" not in script, (where, csp)
    assert directives.get("frame-ancestors") == ["'none'"], (where, csp)


@pytest.fixture(scope="module")
def client(make_client):
    return make_client(raise_server_exceptions=False)


@pytest.mark.parametrize("method, path, headers, status", [
    ("GET", "/", {}, 200),
    ("GET", "/walkthroughs/toy_grpo/steps/clip", {}, 200),
    ("GET", "/walkthroughs/toy_grpo/steps/clip?node=ratio", {"HX-Request": "true"}, 200),
    ("GET", "/walkthroughs/toy_grpo/steps/clip?seed=x", {}, 422),
    ("GET", "/walkthroughs/toy_grpo/steps/clip?seed=x", {"HX-Request": "true"}, 422),
    ("GET", "/walkthroughs/toy_grpo/steps/clip?junk=1", {}, 303),
    ("GET", "/walkthroughs/toy_grpo", {}, 303),
    ("GET", "/walkthroughs/nope/steps/clip", {}, 404),
    ("GET", "/no/such/page", {}, 404),
    ("GET", "/walkthroughs/new", {}, 200),
    ("GET", "/api/walkthroughs", {}, 200),
    ("GET", "/api/walkthroughs/toy_grpo/step?step=clip", {}, 200),
    ("GET", "/api/walkthroughs/toy_grpo/step?seed=-1", {}, 422),
    ("GET", "/api/walkthroughs/nope", {}, 404),
    ("GET", "/api/processes/r1?seed=31", {}, 404),  # a seed no case POSTs: a GET never starts a run, in any order
    ("POST", "/api/processes/r1", {}, 200),
    ("POST", "/api/processes/r1?seed=2", {"X-Forwarded-For": "10.9.9.9"}, 200),
    ("DELETE", "/api/walkthroughs", {}, 405),
    ("POST", "/api/walkthroughs", {}, 422),
    ("GET", "/healthz", {}, 200),
    ("GET", "/openapi.json", {}, 200),
    ("GET", "/static/css/app.css", {}, 200),
    ("GET", "/static/js/app.js", {}, 200),
    ("GET", "/static/nope.css", {}, 404),
    ("GET", "/static/../app/settings.py", {}, 404),
    ("HEAD", "/api/walkthroughs", {}, 200),
    ("PUT", "/api/walkthroughs", {}, 405),
])
def test_security_headers_on_every_kind_of_response(client, method, path, headers, status):
    response = client.request(method, path, headers=headers, follow_redirects=False)
    assert response.status_code == status, (path, response.status_code, response.text[:200])
    assert_security_headers(response)


@pytest.mark.parametrize("path", ["/", "/walkthroughs/toy_grpo/steps/clip", "/walkthroughs/new", "/nope"])
def test_pages_do_not_reflect_the_host_header(client, path):
    """Asset and link URLs are paths: a forged Host header (or a proxy's internal name and
    http scheme behind TLS) must not end up in the page as an absolute URL."""
    response = client.get(path, headers={"Host": "evil.example"})
    reflected = [line.strip() for line in response.text.splitlines() if "evil.example" in line]
    assert not reflected, f"{len(reflected)} lines, e.g. {reflected[:2]}"
