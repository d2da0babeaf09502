"""A whole run opened from one archive over HTTP (issue 34): `POST /api/runs` with the body raw or as a form, and the
upload page's form (`POST /runs/new`, no script). The shipped example as .zip, .tar and .tar.gz is the run
`open_run_dir` stores from the directory; each hostile archive is refused by its member's path inside the archive
(never the server's folder) with nothing left in the upload folder; RUN_UPLOAD_MAX_MB answers 413 before the rest
is read, over a real socket too; a client that leaves mid-upload leaves no file; nothing here is a 5xx."""
from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
import zipfile

import pytest
import uvicorn
from archive_fixtures import TOP, example_archive, example_files, tar_link, tar_of, zeros_zip, zip_of, zip_symlink
from bs4 import BeautifulSoup

from app.house import create_app
from app.runs.domain.run_archive import MB, ArchiveLimits
from app.runs.examples import RUN_DIR, RUN_EXAMPLE
from app.runs.web.run_upload import UploadConfig
from app.runs.web.run_upload_schemas import RunRefusalBody, RunUploadBody
from app.web.settings import Settings

EXAMPLE_ID = hashlib.sha256(RUN_EXAMPLE.read_bytes()).hexdigest()[:16]  # the run store's id, computed here
CONTENT_TYPES = {"zip": "application/zip", "tar": "application/x-tar", "tar.gz": "application/gzip"}


@pytest.fixture
def client(make_client, tmp_path):
    return make_client(data_dir=tmp_path, follow_redirects=False)


def temp_root(client):
    return client.app.state.run_upload.temp_root


def left_behind(client) -> list:
    root = temp_root(client)
    return list(root.rglob("*")) if root.exists() else []


def post(client, raw: bytes, content_type: str = "application/octet-stream"):
    return client.post("/api/runs", content=raw, headers={"content-type": content_type})


@pytest.mark.parametrize("fmt", ["zip", "tar", "tar.gz"])
def test_each_format_opens_as_the_directory_does(client, make_client, tmp_path_factory, fmt):
    r = post(client, example_archive(fmt), CONTENT_TYPES[fmt])
    assert r.status_code == 201, r.text
    body = RunUploadBody.model_validate(r.json())
    # the directory itself, opened by open_run_dir (the example's button) in another data directory
    other = make_client(data_dir=tmp_path_factory.mktemp("other"), follow_redirects=False)
    direct = other.post("/api/runs/examples/trl").json()
    recorded = other.get(f"/api/runs/{direct['id']}").json()["recorded"]
    assert body.id == direct["id"] == EXAMPLE_ID and body.url == f"/runs/{EXAMPLE_ID}"
    assert [r.model_dump() for r in body.recorded] == recorded and [r.step for r in body.recorded] == [30, 60, 90, 120]
    assert body.refused == [] and body.created
    again = post(client, example_archive(fmt))  # the Content-Type is not what decides: the first bytes are
    assert again.status_code == 200 and again.json() == {**r.json(), "created": False}
    assert client.get(body.url).status_code == 200
    assert left_behind(client) == []


def test_a_multipart_body_with_the_archive_part(client):
    r = client.post("/api/runs", files={"archive": ("run.zip", example_archive("zip"), "application/zip")},
                    data={"note": "ignored"})
    assert r.status_code == 201 and r.json()["id"] == EXAMPLE_ID


def test_the_form_without_script_goes_to_the_explorer(client):
    page = BeautifulSoup(client.get("/walkthroughs/new").text, "html.parser")
    form = page.find("form", id="run-upload-form")
    assert form["action"] == "/runs/new" and form["enctype"] == "multipart/form-data" and form["method"] == "post"
    field = form.find("input", type="file")
    r = client.post(form["action"], files={field["name"]: ("run.tar.gz", example_archive("tar.gz"), "application/gzip")})
    assert r.status_code == 303 and r.headers["location"] == f"/runs/{EXAMPLE_ID}"
    assert left_behind(client) == []


def test_the_form_refused_is_the_error_page_naming_the_member(client):
    r = client.post("/runs/new", files={"archive": ("x.tar", tar_of([("run/../../evil", b"x")]), "application/x-tar")})
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/html")
    assert "run/../../evil" in r.text and str(temp_root(client)) not in r.text
    missing = client.post("/runs/new", files={"other": ("x.zip", b"PK", "application/zip")})
    assert missing.status_code == 422 and "archive" in missing.text
    assert left_behind(client) == []


def test_the_upload_page_says_what_to_archive_and_the_limit(make_client, tmp_path):
    client = make_client(data_dir=tmp_path, run_upload_max_mb=300)
    page = BeautifulSoup(client.get("/walkthroughs/new").text, "html.parser")
    words = page.find(id="run-upload").get_text(" ", strip=True)
    for name in ("trainer_state.json", "step-records/", "completions/", "token_exports/", "train_data/",
                 "rollout_data_dir", "300 MB"):
        assert name in words, name
    assert page.find("form", id="run-upload-form")["data-max-bytes"] == str(300 * MB)
    script = page.find(id="run-upload").find("script")["src"]
    assert script.startswith("/static/run_explorer/run-upload.js?v=") and client.get(script).status_code == 200
    assert page.find("progress", id="run-upload-bar") is not None


def refusal(r, status: int) -> RunRefusalBody:
    assert r.status_code == status, r.text
    return RunRefusalBody.model_validate(r.json())


def half(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


HOSTILE = {
    "traversal": (lambda: tar_of([(f"{TOP}/trainer_state.json", b"{}"), (f"{TOP}/../../evil.json", b"x")]),
                  f"{TOP}/../../evil.json", "goes up"),
    "absolute": (lambda: zip_of([(f"{TOP}/trainer_state.json", b"{}"), ("/etc/cron.d/evil", b"x")]),
                 "/etc/cron.d/evil", "absolute"),
    "symlink in a tar": (lambda: tar_of([], extra=[tar_link(f"{TOP}/step-records", "/etc")]),
                         f"{TOP}/step-records", "symbolic link"),
    "symlink in a zip": (lambda: zip_symlink(f"{TOP}/records", "/"), f"{TOP}/records", "symbolic link"),
    "hard link": (lambda: tar_of([(f"{TOP}/a", b"x")], extra=[tar_link(f"{TOP}/b", "/etc/passwd", b"1")]),
                  f"{TOP}/b", "hard link"),
    "not an archive": (lambda: json.dumps({"log_history": []}).encode(), None, "not a .zip, .tar or .tar.gz"),
    "truncated zip": (lambda: half(example_archive("zip")), None, "cut short"),
    "truncated tar.gz": (lambda: half(example_archive("tar.gz")), None, "cut short"),
    "truncated tar": (lambda: half(example_archive("tar")), None, "cut short"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_archive_is_refused_by_name_and_leaves_nothing(client, case):
    build, member, words = HOSTILE[case]
    body = refusal(post(client, build()), 400)
    assert body.member == member and words in body.error
    assert str(temp_root(client)) not in body.error and "run-uploads" not in body.error
    assert left_behind(client) == []
    assert client.get(f"/api/runs/{EXAMPLE_ID}").status_code == 404  # nothing stored


def test_too_many_members(client):
    config = client.app.state.run_upload
    client.app.state.run_upload = UploadConfig(config.temp_root, ArchiveLimits(config.limits.max_bytes, max_members=4))
    body = refusal(post(client, example_archive("zip")), 400)  # the example: 5 files
    assert body.member == f"{TOP}/trainer_state.json" and "more than 4 members" in body.error
    assert left_behind(client) == []


def test_a_bomb_past_the_limit(make_client, tmp_path):
    client = make_client(data_dir=tmp_path, run_upload_max_mb=2)
    raw = zeros_zip(f"{TOP}/zeros.bin", 32 * MB)
    assert len(raw) < 2 * MB  # under the limit as sent: refused as it unpacks
    body = refusal(post(client, raw), 413)
    assert body.member == f"{TOP}/zeros.bin" and "unpacks to more than 2 MB" in body.error
    assert left_behind(client) == []


def test_past_run_upload_max_mb_is_a_413_as_sent(make_client, tmp_path):
    client = make_client(data_dir=tmp_path, run_upload_max_mb=1)
    raw = zip_of([(f"{TOP}/noise.bin", bytes(range(256)) * 8192)], compression=zipfile.ZIP_STORED)  # 2 MB
    body = refusal(post(client, raw), 413)
    assert "RUN_UPLOAD_MAX_MB" in body.error and "1 MB" in body.error
    chunked = client.post("/api/runs", content=iter([raw[i:i + 65536] for i in range(0, len(raw), 65536)]))
    assert refusal(chunked, 413).error == body.error  # no Content-Length: counted as it streams
    page = client.post("/runs/new", files={"archive": ("big.zip", raw, "application/zip")})
    assert page.status_code == 413 and "RUN_UPLOAD_MAX_MB" in page.text
    assert left_behind(client) == []


def test_a_refused_trainer_state_names_its_member_and_field(client):
    state = json.loads(RUN_EXAMPLE.read_text())
    state["log_history"][3]["step"] = -1
    raw = zip_of([(f"{TOP}/trainer_state.json", json.dumps(state).encode())])
    body = refusal(post(client, raw), 422)
    assert body.member == f"{TOP}/trainer_state.json" and body.field == "log_history[3].step"
    assert str(temp_root(client)) not in body.error


def test_no_run_in_the_archive(client):
    body = refusal(post(client, zip_of([("notes/readme.txt", b"hello")])), 422)
    assert body.error.startswith("notes: ") and "trainer_state.json" in body.error
    assert str(temp_root(client)) not in body.error and "run-uploads" not in body.error


def test_a_refused_record_is_named_by_its_path_in_the_archive(client):
    files = [*example_files(), (f"{TOP}/step-records/step-7.grpo-step.json", b"{\"format\": 1}")]
    r = post(client, zip_of(files))
    body = RunUploadBody.model_validate(r.json())
    assert r.status_code == 201 and [f.path for f in body.refused] == [f"{TOP}/step-records/step-7.grpo-step.json"]
    assert "run-uploads" not in r.text and [s.step for s in body.recorded] == [30, 60, 90, 120]


def test_the_form_without_script_names_the_files_left_out_before_the_explorer(client):
    """The explorer does not list an opening's refusals: the form's answer does, with the explorer one click away."""
    files = [*example_files(), (f"{TOP}/step-records/step-7.grpo-step.json", b"{\"format\": 1}")]
    r = client.post("/runs/new", files={"archive": ("run.zip", zip_of(files), "application/zip")})
    assert r.status_code == 201 and r.headers["content-type"].startswith("text/html")
    page = BeautifulSoup(r.text, "html.parser")
    assert "1 file was left out" in page.h1.get_text(" ", strip=True)
    (item,) = page.select("ul.run-upload-refused li")
    assert item.code.get_text() == f"{TOP}/step-records/step-7.grpo-step.json" and "run-uploads" not in r.text
    assert "4 recorded steps linked" in " ".join(page.get_text(" ").split())
    assert page.find("a", id="run-upload-opened-explorer")["href"] == f"/runs/{EXAMPLE_ID}"
    again = client.post("/runs/new", files={"archive": ("run.zip", zip_of(files), "application/zip")})
    assert again.status_code == 200 and "1 file was left out" in again.text  # said at every opening
    assert left_behind(client) == []


def test_a_full_run_store_is_a_507(make_client, tmp_path):
    client = make_client(data_dir=tmp_path, upload_quota_mb=1)
    state = json.loads(RUN_EXAMPLE.read_text())
    state["padding"] = "x" * (2 * MB)  # a trainer_state.json past the 1 MB quota
    r = post(client, zip_of([(f"{TOP}/trainer_state.json", json.dumps(state).encode())]))
    assert refusal(r, 507).error.startswith("the run store is full")


def test_an_unknown_query_parameter(client):
    r = client.post("/api/runs?overwrite=1", content=example_archive("zip"))
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "overwrite"


# -- over a real socket: the 413 before the rest is read, and a client that leaves mid-way ----------------------

@pytest.fixture
def server(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, device="cpu", run_upload_max_mb=4))
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                                        access_log=False))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (srv.started and srv.servers):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    yield app, srv.servers[0].sockets[0].getsockname()[1]
    srv.should_exit = True
    thread.join(timeout=10)


def head(port: int, length: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 f"Content-Length: {length}\r\n\r\n".encode())
    return sock


def test_a_declared_size_past_the_limit_is_answered_413(server):
    app, port = server
    with head(port, 1024 * MB + 1) as sock:  # past the drain bound too: answered at once, nothing read
        answer = sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 413") and "RUN_UPLOAD_MAX_MB" in answer
    assert not list(app.state.run_upload.temp_root.rglob("*"))


def test_a_client_that_leaves_mid_upload_leaves_no_file(server):
    app, port = server
    root = app.state.run_upload.temp_root
    sock = head(port, 3 * MB)
    sock.sendall(example_archive("zip")[:100_000])
    deadline = time.monotonic() + 10
    while not any(p.name == "archive" for p in root.rglob("*")):  # the server is writing it
        assert time.monotonic() < deadline, "the upload never started"
        time.sleep(0.02)
    sock.close()
    while list(root.rglob("*")):
        assert time.monotonic() < deadline, f"left behind: {list(root.rglob('*'))}"
        time.sleep(0.05)
    assert RUN_DIR.is_dir()


def test_the_document_names_each_body(client):
    operation = client.get("/openapi.json").json()["paths"]["/api/runs"]["post"]

    def schema(status: str) -> dict:
        return operation["responses"][status]["content"]["application/json"]["schema"]

    assert schema("201") == schema("200") == {"$ref": "#/components/schemas/RunUploadBody"}
    for status in ("400", "413", "507"):
        assert schema(status) == {"$ref": "#/components/schemas/RunRefusalBody"}, status
    assert schema("422")["anyOf"] == [{"$ref": "#/components/schemas/RunRefusalBody"},
                                      {"$ref": "#/components/schemas/ValidationErrorBody"}]
    body = operation["requestBody"]["content"]
    assert {"application/zip", "application/gzip", "application/x-tar", "multipart/form-data"} <= set(body)
    assert body["multipart/form-data"]["schema"]["required"] == ["archive"]
