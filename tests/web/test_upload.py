"""Snapshot upload, POST /api/walkthroughs (multipart, field `file`): the contract.

- a valid export -> 201 {"id": sha256(bytes)[:16], "runnable": bool, "url": "/walkthroughs/<id>/steps/<opening>"}
- the same bytes again -> 200, same id
- over 2 MB -> 413 {"error": "... 2 MB ..."}
- invalid JSON / wrong format / a bad field -> 422 {"error": "<source>: <field path>: <message>"}
- nesting deeper than 64 levels -> 422 naming the depth
- uploads are kept, never evicted; an operator's delete makes every answer about one a 404
  (quota -> 507, restarts, 65+ uploads, the parsed cache, both backends: test_upload_store.py)
- an upload's page renders; its tensors answer 200 if runnable, 409 if view-only
- ids with "../" or "/" in a walkthrough URL never reach the file system; an upload is
  written nowhere but the data folder's SQLite store

And the compute limit (COMPUTE_SLOTS uncached computations at once, COMPUTE_QUEUE waiting):
past it a request gets 503 + Retry-After with a JSON error at once, never a 500 or a hang;
cached results and /healthz still answer; nested process runs cannot deadlock on one slot.
"""
from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import hashlib
import io
import json
import os
import re
import sqlite3
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_async import run_async
from snapshots import SEED_PATH, other_snapshot, seed_dict

from app.web.settings import PROJECT_ROOT

SEED_BYTES = SEED_PATH.read_bytes()
MB = 1024 * 1024
# a field path as app/domain/json_path.py writes it: a key that is no identifier is a quoted JSON string, which may
# hold any character (hypothesis found `format[","]`)
_PATH_PART = r'(?:[\w.\[\]@#<>-]|"(?:[^"\\]|\\.)*")'
ERROR_RE = re.compile(rf"^<upload>: (\$|\${_PATH_PART}+|[A-Za-z_]{_PATH_PART}*): .+", re.S)


def upload_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


@pytest.fixture
def uploads_dir(tmp_path):
    return tmp_path / "uploads"


@pytest.fixture
def client(uploads_dir, make_client):
    return make_client(uploads_dir=uploads_dir, raise_server_exceptions=False)


def post(client, raw: bytes, filename: str = "mine.tensorviz.json"):
    return client.post("/api/walkthroughs", files={"file": (filename, raw, "application/json")})


def variant(i: int) -> bytes:
    """A distinct valid export: the seed with another snapshotId."""
    doc = seed_dict()
    doc["snapshotId"] = f"variant-{i}"
    return json.dumps(doc).encode()


def test_valid_export_is_201_then_200_with_the_same_id(client):
    first = post(client, SEED_BYTES)
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["id"] == upload_id(SEED_BYTES) and re.fullmatch(r"[0-9a-f]{16}", body["id"])
    assert body["runnable"] is True
    assert body["url"] == f"/walkthroughs/{body['id']}/steps/advantages"
    again = post(client, SEED_BYTES, filename="other-name.json")
    assert again.status_code == 200 and again.json()["id"] == body["id"]


def test_uploaded_runnable_snapshot_renders_and_computes(client):
    body = post(client, SEED_BYTES).json()
    page = client.get(body["url"])
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    soup = BeautifulSoup(page.text, "html.parser")
    assert soup.select("svg#graph [data-node-id]"), "the graph is drawn"
    assert client.get(body["url"], headers={"HX-Request": "true"}).status_code == 200
    tensors = client.get(f"/api/walkthroughs/{body['id']}/step", params={"step": "clip"})
    assert tensors.status_code == 200 and tensors.json()["walkthrough"] == body["id"]
    assert client.get(f"/api/walkthroughs/{body['id']}").json()["opening_step"] == "advantages"


def test_uploaded_view_only_snapshot_renders_and_refuses_tensors(client):
    raw = json.dumps(other_snapshot()).encode()
    body = post(client, raw).json()
    assert body["runnable"] is False and body["url"] == f"/walkthroughs/{body['id']}/steps/first"
    page = client.get(body["url"])
    assert page.status_code == 200
    assert "<script>alert" not in page.text  # the fixture's notes carry markup
    tensors = client.get(f"/api/walkthroughs/{body['id']}/step")
    assert tensors.status_code == 409 and "view-only" in tensors.json()["error"]


def test_over_2_mb_is_413(client):
    doc = seed_dict()
    doc["padding"] = "x" * (2 * MB)
    response = post(client, json.dumps(doc).encode())
    assert response.status_code == 413
    assert "2 MB" in response.json()["error"]
    # a body just under the limit is read and validated, not refused for size
    doc["padding"] = "x" * (2 * MB - len(SEED_BYTES) - 200)
    raw = json.dumps(doc).encode()
    assert len(raw) < 2 * MB
    assert post(client, raw).status_code == 201


@pytest.mark.parametrize("raw, path", [
    (b"{not json", "$"),
    (SEED_BYTES[:1000], "$"),
    (b"\xff\xfe\x00", "$"),
    (b"[]", "$"),
    (b"", "$"),
    (json.dumps({**seed_dict(), "format": "other.graph"}).encode(), "format"),
    (json.dumps({**seed_dict(), "version": 99}).encode(), "version"),
])
def test_invalid_json_or_format_is_422_naming_the_field(client, raw, path):
    response = post(client, raw)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error.startswith(f"<upload>: {path}: "), error


def test_bad_field_is_422_naming_its_path(client):
    doc = seed_dict()
    doc["collaboration"]["walkthrough"]["steps"][2]["view"]["camera"]["z"] = "far"
    error = post(client, json.dumps(doc).encode()).json()["error"]
    assert error.startswith("<upload>: collaboration.walkthrough.steps[2].view.camera.z: "), error
    doc = seed_dict()
    doc["document"]["semantic"]["edges"][0]["target_node_id"] = "nowhere"
    response = post(client, json.dumps(doc).encode())
    assert response.status_code == 422
    assert response.json()["error"].startswith("<upload>: document.semantic.edges[0].target_node_id: ")


@pytest.mark.parametrize("depth, ok", [(60, True), (65, False), (1000, False), (100_000, False)])
def test_nesting_deeper_than_64_levels_is_422(client, depth, ok):
    doc = seed_dict()
    doc["zz_extra"] = "__DEEP__"
    raw = json.dumps(doc).replace('"__DEEP__"', "[" * (depth - 1) + "]" * (depth - 1)).encode()
    response = post(client, raw)
    if ok:
        assert response.status_code == 201, response.text
    else:
        assert response.status_code == 422, response.text
        assert "64" in response.json()["error"] and "nest" in response.json()["error"]


@pytest.mark.parametrize("where", ["anchor_context", "connection"])
def test_deep_json_inside_a_string_is_422_not_500(client, where):
    """The exporter nests JSON documents in strings; their depth counts too."""
    doc = seed_dict()
    anchor = doc["collaboration"]["walkthrough"]["steps"][0]["anchors"][0]
    deep = "[" * 5000 + "]" * 5000
    if where == "anchor_context":
        anchor["context"] = deep
    else:
        context = json.loads(anchor["context"])
        context["connections"] = [deep]
        anchor["context"] = json.dumps(context)
    response = post(client, json.dumps(doc).encode())
    assert response.status_code == 422, f"{response.status_code}: {response.text[:300]}"
    assert response.json()["error"].startswith("<upload>: ")


def test_missing_file_field_is_422_naming_it(client):
    response = client.post("/api/walkthroughs", files={"other": ("x.json", SEED_BYTES, "application/json")})
    assert response.status_code == 422
    assert "file" in response.json()["error"]
    assert client.post("/api/walkthroughs", data={"file": "not a file"}).status_code == 422


def test_a_deleted_upload_is_gone_even_after_it_was_viewed(client):
    """Deletion (the operator's, python -m app.uploads) must also reach anything that remembers the
    upload's answers (the parsed cache, a response cache)."""
    first = post(client, variant(1000)).json()
    viewed = [first["url"], f"/api/walkthroughs/{first['id']}", f"/api/walkthroughs/{first['id']}/step?step=clip"]
    for url in viewed:
        assert client.get(url).status_code == 200
    assert client.app.state.catalog.uploads.delete(first["id"]) is True
    for url in viewed:
        response = client.get(url)
        assert response.status_code == 404, f"{url} still answers {response.status_code} after deletion"
    # uploading the same bytes again brings it back, under the same id
    again = post(client, variant(1000))
    assert again.status_code == 201 and again.json()["id"] == first["id"]
    assert client.get(first["url"]).status_code == 200


def test_uploads_touch_only_the_uploads_folder(client, uploads_dir, tmp_path, monkeypatch):
    touched: list[str] = []
    real = {"builtins": builtins.open, "io": io.open, "os": os.open}

    def record(name):
        def wrapped(file, *args, **kwargs):
            # a path is what a traversal would reach; an int is a descriptor already open (a pipe subprocess.Popen
            # wraps, as a `dot` layout on another thread does, now and then, inside this window): no path to check
            if isinstance(file, (str, bytes, os.PathLike)):
                touched.append(os.path.abspath(os.fsdecode(file)))
            return real[name](file, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(builtins, "open", record("builtins"))
    monkeypatch.setattr(io, "open", record("io"))
    monkeypatch.setattr(os, "open", record("os"))
    evil = "../../../../tmp/evil-upload.json"
    body = post(client, SEED_BYTES, filename=evil).json()
    for wid in ("../../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "/etc/passwd", "%2e%2e%2f%2e%2e%2fapp",
                "..", "....//....//etc", "0123456789abcdef/../../x", "0123456789abcdef%2F..%2F..%2Fx"):
        for url in (f"/api/walkthroughs/{wid}", f"/api/walkthroughs/{wid}/step", f"/walkthroughs/{wid}/steps/clip"):
            r = client.get(url)
            assert r.status_code in (404, 405, 307, 422), (url, r.status_code)
            assert "root:x:0:0" not in r.text
    assert client.get("/api/walkthroughs/0123456789abcdef").status_code == 404
    assert client.get(body["url"]).status_code == 200
    monkeypatch.undo()
    allowed = (str(uploads_dir.resolve()), str(PROJECT_ROOT / "templates"), str(PROJECT_ROOT / "static"))
    kinds = PROJECT_ROOT / "app" / "kinds"   # a kind's own templates and static files (read on a first render)

    def a_kinds_asset(path: str) -> bool:
        return path.startswith(str(kinds)) and Path(path).relative_to(kinds).parts[1:2] in (("templates",), ("static",))

    outside = sorted({p for p in touched if not p.startswith(allowed) and not a_kinds_asset(p)})
    assert not outside, f"opened outside the uploads folder: {outside}"
    # SQLite writes from C, out of the hooks' sight: the folder holds its files and nothing else
    assert {p.name for p in uploads_dir.iterdir()} <= {"uploads.sqlite3", "uploads.sqlite3-wal", "uploads.sqlite3-shm"}
    with contextlib.closing(sqlite3.connect(uploads_dir / "uploads.sqlite3")) as db:
        assert db.execute("SELECT id FROM grpo_uploads").fetchall() == [(body["id"],)]
    assert not os.path.exists("/tmp/evil-upload.json")
    assert not any("passwd" in p or "evil" in p for p in touched)


def test_html_upload_form(client):
    form = client.get("/walkthroughs/new")
    assert form.status_code == 200
    assert BeautifulSoup(form.text, "html.parser").select_one("form input[type=file][name=file]")
    ok = client.post("/walkthroughs/new", files={"file": ("mine.json", SEED_BYTES, "application/json")},
                     follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == f"/walkthroughs/{upload_id(SEED_BYTES)}/steps/advantages"
    bad = client.post("/walkthroughs/new", files={"file": ("mine.json", b"{", "application/json")})
    assert bad.status_code == 422
    assert BeautifulSoup(bad.text, "html.parser").select_one("#upload-error").get_text().startswith("<upload>: $: ")


# -- fuzz: any body, any mutation of the seed -> a clear 2xx/4xx, never a 5xx -----------------

def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


SEED = seed_dict()
SEED_PATHS = [p for p in _paths(SEED) if p]
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                           max_leaves=5)


@pytest.fixture(scope="module")
def fuzz_client(make_client):
    return make_client(raise_server_exceptions=False)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(SEED_PATHS), value=JSON_VALUES, raw_tail=st.binary(max_size=20), kind=st.sampled_from(
    ["mutate", "mutate", "bytes", "truncate"]))
def test_fuzzed_uploads_get_a_clear_answer(fuzz_client, path, value, raw_tail, kind):
    client = fuzz_client
    if kind == "mutate":
        doc = copy.deepcopy(SEED)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
        raw = json.dumps(doc).encode()
    elif kind == "bytes":
        raw = raw_tail
    else:
        raw = SEED_BYTES[: len(raw_tail) * 997 % len(SEED_BYTES)] + raw_tail
    response = post(client, raw)
    assert response.status_code in (200, 201, 413, 422), f"{response.status_code}: {response.text[:300]}"
    body = response.json()
    if response.status_code == 422:
        assert ERROR_RE.match(body["error"]), body["error"]
    else:
        assert body["id"] == upload_id(raw)
        assert client.get(body["url"]).status_code == 200




# -- the compute limit ---------------------------------------------------------------------------

HEAVY = "/api/walkthroughs/toy_grpo/step?node=input&group_size=4096&iteration=20&inner_steps=8&seed="


async def _burst(base_url: str, paths: list[str]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        return await asyncio.gather(*(client.get(p) for p in paths))


def test_compute_limit_refuses_extra_work_with_503_at_once(tmp_path):
    from test_load import running_server

    env = {"COMPUTE_SLOTS": "1", "COMPUTE_QUEUE": "1"}
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning", env=env) as server:
        cached = httpx.get(server.url + "/api/walkthroughs/toy_grpo/step", timeout=30)
        assert cached.status_code == 200
        paths = [f"{HEAVY}{seed}" for seed in range(1000, 1012)]
        responses = run_async(_burst(server.url, paths + ["/api/walkthroughs/toy_grpo/step", "/healthz"]))
        *heavy, again_cached, health = responses
        statuses = sorted(r.status_code for r in heavy)
        assert set(statuses) <= {200, 503}, statuses
        assert statuses.count(200) >= 1 and statuses.count(503) >= 1, statuses
        for r in heavy:
            if r.status_code == 503:
                assert r.headers.get("retry-after"), r.headers
                assert r.json()["error"].startswith("busy"), r.text
        assert again_cached.status_code == 200 and health.status_code == 200
        # once the burst is over, every refused request succeeds on retry
        for path, r in zip(paths, heavy, strict=True):
            if r.status_code == 503:
                assert httpx.get(server.url + path, timeout=60).status_code == 200


def test_nested_process_runs_do_not_deadlock_on_one_slot(tmp_path):
    from test_load import running_server

    env = {"COMPUTE_SLOTS": "1", "COMPUTE_QUEUE": "4"}
    with running_server(tmp_path, "--device", "cpu", "--log-level", "warning", env=env) as server:
        # distillation starts from R1's checkpoints: a process run inside a process run
        response = httpx.post(server.url + "/api/processes/distillation?seed=321", timeout=30)
        assert response.status_code == 200, response.text[:300]
        page = httpx.post(server.url + "/walkthroughs/toy_grpo/steps/clip?seed=322&process=distillation", timeout=30,
                          follow_redirects=True)  # its Run button, then the page
        assert page.status_code == 200 and "Not computed yet" not in page.text


def test_the_fuzz_tests_error_pattern_reads_every_path_json_path_writes():
    """The pattern the fuzz test holds answers to: any key json_path.render_loc quotes, commas and colons included."""
    from app.domain.json_path import render_loc
    for loc in (("format", ","), ("format", "a: b"), (",",), ("groups", 0, "completions", 1, "token_ids"),
                ("nodes", "python@ratio#0", "x"), (0,)):
        message = f"<upload>: {render_loc(loc)}: refused"
        assert ERROR_RE.match(message), message
    assert not ERROR_RE.match("<upload>: : refused") and not ERROR_RE.match("<upload>: a b: refused")
