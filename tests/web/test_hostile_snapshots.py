"""Hostile snapshots served: unknown ops, path-like ids, markup in every text field, and a
walkthroughs folder full of bad files. Nothing from a snapshot becomes a path or runs in the
browser, and a bad file is listed with its error while the good ones still serve."""
from __future__ import annotations

import builtins
import copy
import io
import json
import logging
import os
import re
from urllib.parse import quote

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from hostile import (
    ODD_VALUES,
    PATH_RE,
    SEED,
    assert_servable,
    mutate,
    nested,
    payload,
    serve,
    served_urls,
    small_snapshot,
    swappable_client,
    traversal_snapshot,
    with_raw,
)
from snapshots import SEED_PATH

from app.domain.snapshot import parse_snapshot
from app.domain.uploads import upload_id
from app.house import create_app
from app.web.settings import PROJECT_ROOT, Settings

SEED_BYTES = SEED_PATH.read_bytes()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    yield from swappable_client(tmp_path_factory)




def test_unknown_ops_are_accepted_view_only(client):
    doc = copy.deepcopy(SEED)
    for node in doc["document"]["semantic"]["nodes"]:
        if node["kind"] == "layer":
            node["op"] = "torch.totally_new_op"
    doc["document"]["semantic"]["nodes"].append(
        {"node_id": "mystery", "kind": "layer", "op": "Nonexistent<Op>", "params": {"k": 1}, "metadata": {}})
    doc["document"]["view"]["node_positions"]["mystery"] = {"x": 0, "y": 0}
    snap = parse_snapshot(doc)
    serve(client, {"ops": snap})
    assert client.get("/api/walkthroughs").json()[0]["runnable"] is False
    assert client.get("/api/walkthroughs/ops/step").status_code == 409
    assert client.get("/walkthroughs/ops/steps/clip?node=mystery").status_code == 200
    assert_servable(client, snap, "ops")


def test_an_unknown_op_on_a_known_node_makes_it_view_only(client):
    """The torch model matches a snapshot only if its nodes are the model's: same ids *and* ops.
    Same ids with another op would show ToyGRPO's numbers under a graph that claims other layers."""
    doc = mutate(SEED, ("document", "semantic", "nodes", 2, "op"), "replace", "torch.nn.Conv2d")
    serve(client, {"conv": parse_snapshot(doc)})
    assert client.get("/api/walkthroughs").json()[0]["runnable"] is False
    assert client.get("/api/walkthroughs/conv/step").status_code == 409


def test_path_like_strings_are_never_paths(client, monkeypatch, tmp_path):
    snap = parse_snapshot(traversal_snapshot())
    ids = [n.node_id for n in snap.nodes] + [s.id for s in snap.steps]
    assert any("../" in i for i in ids) and any(i.startswith("/") for i in ids)
    serve(client, {"paths": snap})

    touched: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def record(opener):
        def wrapped(file, *args, **kwargs):
            if isinstance(file, int):  # a file descriptor, not a path: the pipes to Graphviz's dot
                return opener(file, *args, **kwargs)
            touched.append(os.fsdecode(file) if isinstance(file, (str, bytes, os.PathLike)) else repr(file))
            return opener(file, *args, **kwargs)
        return wrapped

    templates = client.app.state.context.templates
    templates.env.cache.clear()  # so templates load again, and the hook sees what loading opens
    monkeypatch.setattr(builtins, "open", record(real_open))
    monkeypatch.setattr(io, "open", record(real_io_open))
    monkeypatch.setattr(os, "open", record(real_os_open))
    before = set(os.listdir(tmp_path.parent))
    statuses = []
    for url in served_urls("paths", snap):
        for headers in ({}, {"HX-Request": "true"}):
            r = client.get(url, headers=headers)
            statuses.append(r.status_code)
            assert r.status_code < 500, f"{url}: {r.status_code} {r.text[:300]}"
            assert "root:x:0:0" not in r.text and "[fonts]" not in r.text
    monkeypatch.undo()
    allowed = (str(PROJECT_ROOT / "templates"), str(PROJECT_ROOT / "static"))
    outside = [p for p in touched if not os.path.abspath(p).startswith(allowed)]
    assert not outside, f"files opened while serving a snapshot: {sorted(set(outside))}"
    assert any(p.endswith(".html") for p in touched), "the hook saw the templates load"
    assert set(os.listdir(tmp_path.parent)) == before
    assert 200 in statuses


def test_every_step_is_reachable_by_the_url_the_app_links(client):
    """Step ids are plain strings: one containing "/" (e.g. "../x") must still open."""
    snap = parse_snapshot(traversal_snapshot())
    serve(client, {"paths": snap})
    for step in snap.steps:
        page = client.get(f"/walkthroughs/paths/steps/{quote(step.id, safe='')}")
        assert page.status_code == 200, f"step {step.id!r}: {page.status_code} {page.request.url}"


def test_markup_in_every_text_field_is_escaped(client):
    snap = parse_snapshot(small_snapshot(payload))
    serve(client, {"xss": snap})
    module, member = snap.nodes[1].node_id, snap.nodes[2].node_id
    seen_as_text = set()
    urls = served_urls("xss", snap) + [
        f"/walkthroughs/xss/steps/{quote(snap.steps[1].id, safe='')}?node={quote(member)}",
        f"/walkthroughs/xss/steps/{quote(snap.steps[0].id, safe='')}?node={quote(module)}&expanded={quote(module)}"]
    rendered = 0
    for url in urls:
        if not url.startswith("/walkthroughs/"):
            continue
        for headers in ({}, {"HX-Request": "true"}):
            r = client.get(url, headers=headers, follow_redirects=True)
            assert r.status_code < 500, f"{url}: {r.status_code}"
            if r.status_code != 200 or "text/html" not in r.headers["content-type"]:
                continue
            rendered += 1
            assert "<script>alert(" not in r.text and 'onerror="alert' not in r.text, url
            soup = BeautifulSoup(r.text, "html.parser")
            for script in soup.find_all("script"):
                assert "PWN" not in script.get_text() and not script.get("src", "/static/").startswith("x"), url
            for tag in soup.find_all(True):
                assert not [a for a in tag.attrs if a.lower().startswith("on")], f"{url}: <{tag.name} {tag.attrs}>"
                assert tag.name != "img" or tag.get("src") != "x", url
            text = soup.get_text()
            seen_as_text |= set(re.findall(r'alert\("PWN-([\w.]+)"\)', text))
    assert rendered >= 4, "the step pages rendered"
    # the visible fields reach the page as text, escaped
    assert {"step.title", "step.note", "node.input", "node.module", "walkthrough.title"} <= seen_as_text, seen_as_text


BAD_FILES = {
    "truncated.json": SEED_BYTES[: len(SEED_BYTES) // 2],
    "wrong_type.json": json.dumps({**SEED, "document": {**SEED["document"], "schemaVersion": "two"}}).encode(),
    "camera.json": json.dumps(mutate(SEED, ("collaboration", "walkthrough", "steps", 2, "view", "camera", "z"),
                                      "replace", -1)).encode(),
    "deep.json": with_raw("top", nested(1000)).encode(),
    "notutf8.json": b"\xff\xfe\x00{",
    "array.json": b"[]",
}


def test_folder_loader_lists_bad_files_with_errors_and_serves_the_good(tmp_path, caplog):
    (tmp_path / SEED_PATH.name).write_bytes(SEED_BYTES)
    for name, raw in BAD_FILES.items():
        (tmp_path / name).write_bytes(raw)
    (tmp_path / "unknown_ops.json").write_text(json.dumps(mutate(SEED, ("document", "semantic", "nodes", 1, "op"),
                                                                  "replace", "torch.brand_new")))
    (tmp_path / "paths.json").write_text(json.dumps(traversal_snapshot()))
    with caplog.at_level(logging.WARNING):
        app = create_app(Settings(device="cpu", walkthroughs_dir=tmp_path, uploads_dir=tmp_path / "up"))
    with TestClient(app, raise_server_exceptions=False) as c:
        items = {w["id"]: w for w in c.get("/api/walkthroughs").json()}
        for name in BAD_FILES:
            wid = name.removesuffix(".json")
            error = items[wid]["error"]
            assert error and error.startswith(f"{name}: "), (name, error)
            path = error.split(": ", 2)[1]
            assert PATH_RE.match(path), error
            assert name in caplog.text, f"{name} not logged"
            assert c.get(f"/api/walkthroughs/{wid}").status_code == 404
            assert c.get(f"/walkthroughs/{wid}/steps/clip").status_code == 404
        assert items["wrong_type"]["error"].startswith("wrong_type.json: document.schemaVersion: ")
        assert "camera.z" in items["camera"]["error"]
        assert items["toy_grpo"]["error"] is None and items["toy_grpo"]["runnable"] is True
        assert items["unknown_ops"]["error"] is None
        assert items["paths"]["error"] is None
        assert c.get("/api/walkthroughs/toy_grpo/step?step=clip").status_code == 200
        assert c.get("/walkthroughs/toy_grpo/steps/clip").status_code == 200
        assert c.get("/").status_code == 200


@pytest.mark.parametrize("where", ["anchor_context_string", "connection_string"])
def test_folder_loader_survives_deep_json_inside_strings(tmp_path, where):
    """A file the parser cannot handle is one bad entry, not an app that fails to start."""
    (tmp_path / SEED_PATH.name).write_bytes(SEED_BYTES)
    (tmp_path / "deep_string.json").write_text(with_raw(where, nested(5000)))
    app = create_app(Settings(device="cpu", walkthroughs_dir=tmp_path, uploads_dir=tmp_path / "up"))
    with TestClient(app, raise_server_exceptions=False) as c:
        items = {w["id"]: w for w in c.get("/api/walkthroughs").json()}
        assert items["deep_string"]["error"].startswith("deep_string.json: ")
        assert c.get("/api/walkthroughs/toy_grpo/step").status_code == 200


# -- odd values: refused by field at upload and at start-up, never a 500 ---------------

@pytest.mark.parametrize("name", ODD_VALUES)
def test_an_odd_value_in_an_upload_is_422_naming_the_field(make_client, name):
    raw, path = ODD_VALUES[name]
    c = make_client(raise_server_exceptions=False, walkthroughs_dir=SEED_PATH.parent)
    api = c.post("/api/walkthroughs", files={"file": ("odd.json", raw.encode(), "application/json")})
    assert api.status_code == 422, (name, api.status_code, api.text[:300])
    assert api.json()["error"].startswith(f"<upload>: {path}: "), api.json()["error"]
    page = c.post("/walkthroughs/new", files={"file": ("odd.json", raw.encode(), "application/json")})
    assert page.status_code == 422, (name, page.status_code, page.text[:300])
    shown = BeautifulSoup(page.text, "html.parser").select_one("#upload-error").get_text()
    assert shown.startswith(f"<upload>: {path}: "), shown
    # never stored: its id does not open
    assert c.get(f"/walkthroughs/{upload_id(raw.encode())}").status_code == 404


def test_a_stored_upload_that_no_longer_loads_is_404_not_500(make_client, tmp_path):
    """A file kept by an older, laxer parser: refused on reading it, not a 500 for ever."""
    uploads = tmp_path / "up"
    uploads.mkdir()
    for raw, _ in ODD_VALUES.values():
        (uploads / f"{upload_id(raw.encode())}.json").write_text(raw)
    c = make_client(raise_server_exceptions=False, walkthroughs_dir=SEED_PATH.parent, uploads_dir=uploads,
                    follow_redirects=False)
    for raw, _ in ODD_VALUES.values():
        ident = upload_id(raw.encode())
        for url in (f"/walkthroughs/{ident}", f"/walkthroughs/{ident}/steps/clip", f"/api/walkthroughs/{ident}"):
            assert c.get(url).status_code == 404, url


def _odd_folder(folder):
    (folder / SEED_PATH.name).write_bytes(SEED_BYTES)
    for name, (raw, _) in ODD_VALUES.items():
        (folder / f"{name}.json").write_text(raw)
    (folder / "dangling.json").symlink_to(folder / "gone.json")
    (folder / "folder.json").mkdir()
    (folder / "...json").write_bytes(SEED_BYTES)  # its id would be ".."
    (folder / os.fsdecode(b"latin\xe9.json")).write_bytes(SEED_BYTES)  # not UTF-8: kept as a surrogate


def test_start_up_lists_odd_files_and_entries_with_their_errors(make_client, tmp_path):
    _odd_folder(tmp_path)
    c = make_client(raise_server_exceptions=False, walkthroughs_dir=tmp_path)
    assert c.get("/healthz").status_code == 200
    items = {w["id"]: w for w in c.get("/api/walkthroughs").json()}
    for name, (_, path) in ODD_VALUES.items():
        assert items[name]["error"].startswith(f"{name}.json: {path}: "), items[name]
    assert items["dangling"]["error"] == "dangling.json: $: a symbolic link to nothing"
    assert items["folder"]["error"] == "folder.json: $: a directory, not a file"
    assert "cannot be a URL path segment" in items[".."]["error"]
    assert items["latin\ufffd"]["error"] == "latin\ufffd.json: $: the file name is not valid UTF-8"
    assert all(PATH_RE.match(w["error"].split(": ", 2)[1]) for w in items.values() if w["error"]), items
    assert items["toy_grpo"]["error"] is None
    assert c.get("/").status_code == 200
    assert c.get("/walkthroughs/toy_grpo/steps/clip").status_code == 200
    for wid in ("dot_dot_step", "big_int", "dangling"):
        assert c.get(f"/walkthroughs/{wid}").status_code == 404


def test_a_folder_where_nothing_loads_still_lists_every_entry(make_client, tmp_path):
    _odd_folder(tmp_path)
    (tmp_path / SEED_PATH.name).unlink()
    (tmp_path / "...json").unlink()
    c = make_client(raise_server_exceptions=False, walkthroughs_dir=tmp_path)
    assert c.get("/healthz").status_code == 200
    home = c.get("/")
    assert home.status_code == 503, home.text[:300]
    for name in [*ODD_VALUES, "dangling", "folder", "latin\ufffd"]:
        assert f"{name}.json" in home.text, name


def test_an_opening_step_id_of_dot_dot_no_longer_loops(client):
    """Refused at load (above); every other id, odd dots included, opens in one redirect."""
    raw, path = ODD_VALUES["dot_dot_step"]
    assert parse_or_refused_path(raw) == path
    doc = copy.deepcopy(SEED)
    steps = doc["collaboration"]["walkthrough"]["steps"]
    # (not "%2e%2e" here: TestClient unquotes the already-decoded path a second time; uvicorn does not)
    odd_ids = ["...", ".x", "a/..", ". ."]
    for step, odd in zip(steps, odd_ids, strict=True):
        step["id"] = odd
    doc["collaboration"]["savedViews"] = []
    for odd in odd_ids:
        doc["collaboration"]["openingViewId"] = odd
        serve(client, {"dots": parse_snapshot(doc)})
        first = client.get("/walkthroughs/dots", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == f"/walkthroughs/dots/steps/{quote(odd, safe='')}"
        page = client.get("/walkthroughs/dots")
        assert page.status_code == 200 and len(page.history) == 1, (odd, [r.url for r in page.history])


def parse_or_refused_path(raw) -> str | None:
    try:
        parse_snapshot(raw)
    except ValueError as exc:
        return exc.path  # type: ignore[attr-defined]
    return None
