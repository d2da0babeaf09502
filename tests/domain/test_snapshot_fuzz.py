"""Bad and hostile snapshots: through app.domain.snapshot.parse_snapshot, the folder loader and the pages.

Contract: parse_snapshot raises only SnapshotError, whose message is
"<source>: <field path>: <why>"; a bad file in the walkthroughs folder is listed with that
error while the good ones still serve; a snapshot that *is* accepted can be served by every
route without a 5xx; nothing from a snapshot becomes a path or runs in the browser.

Bounds (see test_huge_node_arrays_are_refused_in_bounded_time): at most 10,000 nodes,
50,000 edges and 1,000 steps (100k nodes once parsed in ~4 s and made a page of tens of MB
of SVG). Uploads are also capped at 2 MB (tests/test_upload.py), about 17k nodes.
"""
from __future__ import annotations

import builtins
import copy
import io
import json
import logging
import os
import re
import time
from urllib.parse import quote

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reporting import report
from snapshots import SEED_PATH, seed_dict

from app.domain.catalog import Catalog, CatalogEntry
from app.domain.snapshot import Snapshot, SnapshotError, parse_snapshot
from app.web.factory import create_app
from app.web.settings import PROJECT_ROOT, Settings

pytestmark = pytest.mark.slow  # still run by `make test`; `-m 'not slow'` for a quick local loop

SEED_BYTES = SEED_PATH.read_bytes()
SEED = seed_dict()
# "<source>: <path>: <message>", the path being "$" or a JSON path such as
# document.semantic.nodes[3].metadata.parentId or document.view.node_positions["python@ratio#0"].x
PATH_RE = re.compile(r'^(\$|[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*)$')


def fuzz_settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def assert_refused(raw, source: str = "fuzz.json") -> SnapshotError:
    """parse_snapshot raises SnapshotError (and nothing else) naming a well-formed field path."""
    try:
        parse_snapshot(raw, source=source)
    except SnapshotError as exc:
        assert PATH_RE.match(exc.path), f"not a field path: {exc.path!r} ({exc})"
        assert str(exc).startswith(f"{source}: {exc.path}: ") and exc.message.strip(), str(exc)
        assert all(PATH_RE.match(p) for p, _ in exc.errors), exc.errors
        return exc
    raise AssertionError("accepted")


def parse_or_refuse(raw, source: str = "fuzz.json") -> Snapshot | None:
    try:
        return parse_snapshot(raw, source=source)
    except SnapshotError as exc:
        assert PATH_RE.match(exc.path), f"not a field path: {exc.path!r} ({exc})"
        assert str(exc).startswith(f"{source}: {exc.path}: ") and exc.message.strip(), str(exc)
        return None


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One app; tests swap in their own catalog (a test-side change of app.state only), so the
    whole-response cache is off: it would replay a previous catalog's answers for the same URL."""
    empty = tmp_path_factory.mktemp("empty")
    return create_app(Settings(device="cpu", walkthroughs_dir=empty, uploads_dir=tmp_path_factory.mktemp("up"),
                               response_cache_mb=0))


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module", autouse=True)
def report_counts(request):
    yield
    line = (f"test_snapshot_fuzz: {MUTANTS['accepted'] + MUTANTS['refused']} mutated snapshots "
            f"({MUTANTS['refused']} refused by field, {MUTANTS['accepted']} accepted and served)")
    report(request, line)


def serve(app, snapshots: dict[str, Snapshot]) -> None:
    app.state.catalog = Catalog([CatalogEntry(i, f"{i}.json", s, None) for i, s in snapshots.items()])


def served_urls(wid: str, snap: Snapshot) -> list[str]:
    """Everything a browser or client can ask about one snapshot."""
    urls = [f"/api/walkthroughs/{wid}", f"/api/walkthroughs/{wid}/tensors", f"/walkthroughs/{wid}"]
    for step in snap.steps:
        s = quote(step.id, safe="")
        urls += [f"/walkthroughs/{wid}/steps/{s}", f"/api/walkthroughs/{wid}/tensors?step={quote(step.id)}"]
    modules = ",".join(m.node_id for m in snap.modules)
    first = quote(snap.steps[0].id, safe="")
    urls.append(f"/walkthroughs/{wid}/steps/{first}?expanded={quote(modules)}")
    for node in snap.nodes[:40]:
        urls.append(f"/walkthroughs/{wid}/steps/{first}?node={quote(node.node_id)}")
    return urls


def assert_servable(app, client, snap: Snapshot, wid: str = "fz", fragment_too: bool = False,
                    light: bool = False) -> None:
    serve(app, {wid: snap})
    urls = served_urls(wid, snap)
    if light:  # summary, tensors, the opening page, every step fragment... and a node page
        urls = urls[:3] + [u for u in urls if "tensors?step=" in u] + urls[-1:]
    for url in urls:
        for headers in ([{}, {"HX-Request": "true"}] if fragment_too else [{}]):
            r = client.get(url, headers=headers)
            assert r.status_code < 500, f"GET {url} -> {r.status_code}: {r.text[:300]}"


# -- truncation ------------------------------------------------------------------------

def test_truncated_json_at_many_cut_points():
    n = len(SEED_BYTES)
    cuts = sorted(set(range(0, n, max(1, n // 300))) | {1, 2, n - 1, n - 2}
                  | {i for i, b in enumerate(SEED_BYTES) if b in b"{[" and i % 7 == 0})
    for cut in cuts:
        exc = assert_refused(SEED_BYTES[:cut])
        assert exc.path == "$" and "JSON" in exc.message, (cut, str(exc))
    assert len(cuts) > 300
    # and bytes that are not UTF-8 at all
    for raw in (b"\xff\xfe{}", SEED_BYTES[:100] + b"\xc3\x28" + SEED_BYTES[102:], b"\x00" * 10):
        assert assert_refused(raw).path == "$"


@pytest.mark.parametrize("raw, fragment", [
    ("", "JSON"), ("[]", "array"), ('"x"', "string"), ("null", "null"), ("1", "number"), ("true", "boolean"),
    ("{}", "format"), ('{"format": "tensorviz.graph"}', "version"), ("NaN", "number"),
])
def test_not_an_export_at_all(raw, fragment):
    assert fragment in str(assert_refused(raw))


# -- wrong types anywhere: replace a random leaf or subtree of the seed -------------------

def _all_paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _all_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _all_paths(v, (*prefix, i))


SEED_PATHS = [p for p in _all_paths(SEED) if p]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12) | st.sampled_from(["", "policy", "clip", "../etc/passwd", "<script>x</script>", "{}", "[]",
                                              '{"connections": 1}', "[[[[[[]]]]]]"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _mutate(doc, path, action, value):
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif action == "stringify":  # the exporter nests JSON in strings; do it where it does not
        parent[last] = json.dumps(parent[last])
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    elif action == "extra" and isinstance(parent[last], dict):
        parent[last]["zz_extra"] = value
    return doc


MUTANTS: dict[str, int] = {"accepted": 0, "refused": 0}
MUTATIONS = st.lists(st.tuples(st.sampled_from(SEED_PATHS),
                               st.sampled_from(["replace", "replace", "delete", "stringify", "duplicate", "extra"]),
                               JSON_VALUES), min_size=1, max_size=3)


@fuzz_settings(700)
@given(mutations=MUTATIONS, as_bytes=st.booleans())
def test_mutated_seed_is_refused_by_field_or_served(app, client, mutations, as_bytes):
    doc = SEED
    for path, action, value in mutations:
        try:
            doc = _mutate(doc, path, action, value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or retyped this path
    raw = json.dumps(doc).encode() if as_bytes else doc
    snap = parse_or_refuse(raw)
    MUTANTS["accepted" if snap is not None else "refused"] += 1
    if snap is not None:
        assert_servable(app, client, snap, light=True)


# -- structure: cycles, depth, size ------------------------------------------------------

def _node(doc, node_id):
    return next(n for n in doc["document"]["semantic"]["nodes"] if n["node_id"] == node_id)


def test_membership_cycles_are_refused():
    doc = copy.deepcopy(SEED)
    ratio, clipped = _node(doc, "ratio"), _node(doc, "clipped")
    ratio["metadata"]["parentId"], clipped["metadata"]["parentId"] = "clipped", "ratio"
    ratio["metadata"]["moduleMembers"].append("clipped")
    clipped["metadata"]["moduleMembers"].append("ratio")
    exc = assert_refused(doc)
    assert any("cycle" in m for _, m in exc.errors), exc.errors
    assert any(p.startswith("document.semantic.nodes[") and p.endswith("metadata.parentId") for p, _ in exc.errors)

    doc = copy.deepcopy(SEED)  # a module that contains itself
    ratio = _node(doc, "ratio")
    ratio["metadata"]["parentId"] = "ratio"
    ratio["metadata"]["moduleMembers"].append("ratio")
    assert any("cycle" in m for _, m in assert_refused(doc).errors)


def _nested(depth: int, kind: str = "list") -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


def _with_raw(fragment_at: str, deep_json: str) -> str:
    """The seed's JSON text with a deeply nested value put somewhere."""
    doc = copy.deepcopy(SEED)
    marker = "__DEEP__"
    if fragment_at == "top":
        doc["zz_extra"] = marker
    elif fragment_at == "params":
        doc["document"]["semantic"]["nodes"][1]["params"]["deep"] = marker
    elif fragment_at == "anchor_context_string":  # a JSON document inside a JSON string
        doc["collaboration"]["walkthrough"]["steps"][0]["anchors"][0]["context"] = deep_json
        return json.dumps(doc)
    elif fragment_at == "connection_string":
        anchor = doc["collaboration"]["walkthrough"]["steps"][0]["anchors"][0]
        context = json.loads(anchor["context"])
        context["connections"] = [deep_json]
        anchor["context"] = json.dumps(context)
        return json.dumps(doc)
    return json.dumps(doc).replace(json.dumps(marker), deep_json)


@pytest.mark.parametrize("where", ["top", "params", "anchor_context_string", "connection_string"])
@pytest.mark.parametrize("kind", ["list", "object"])
def test_1000_levels_of_nesting_are_refused_without_recursion_error(where, kind):
    raw = _with_raw(where, _nested(1000, kind))
    exc = assert_refused(raw)  # fails with RecursionError escaping if not caught
    assert exc.message


@pytest.mark.parametrize("depth", [64, 200, 400, 900])
def test_nesting_that_is_accepted_is_also_served(app, client, depth):
    """Whatever depth parse_snapshot accepts in free-form fields, every route can serve."""
    snap = parse_or_refuse(_with_raw("params", _nested(depth, "object")))
    if snap is not None:
        assert_servable(app, client, snap)


def test_huge_node_arrays_are_refused_in_bounded_time(app, client):
    """100k nodes are refused, naming the field and the limit, before any model validation."""
    doc = copy.deepcopy(SEED)
    n = 100_000
    doc["document"]["semantic"]["nodes"] += [
        {"node_id": f"n{i}", "kind": "layer", "op": "Linear", "params": {}, "metadata": {}} for i in range(n)]
    doc["document"]["view"]["node_positions"].update({f"n{i}": {"x": i, "y": 0} for i in range(n)})
    raw = json.dumps(doc)
    t0 = time.perf_counter()
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(raw)
    elapsed = time.perf_counter() - t0
    assert "document.semantic.nodes: 100018 items exceed the limit of 10000" in str(info.value)
    assert elapsed < 30, f"100k nodes took {elapsed:.1f} s to refuse"
    # A 5k-node graph (uploads top out near 17k) is served, view-only, in bounded time.
    doc["document"]["semantic"]["nodes"] = doc["document"]["semantic"]["nodes"][:18 + 5000]
    small = parse_snapshot(json.dumps(doc))
    serve(app, {"big": small})
    assert client.get("/api/walkthroughs/big/tensors").status_code == 409
    t0 = time.perf_counter()
    r = client.get("/walkthroughs/big/steps/clip")
    assert r.status_code == 200 and time.perf_counter() - t0 < 20


def test_huge_arrays_elsewhere_are_bounded():
    doc = copy.deepcopy(SEED)
    doc["collaboration"]["walkthrough"]["steps"][0]["view"]["selectedNodeIds"] = ["nope"] * 100_000
    t0 = time.perf_counter()
    exc = assert_refused(doc)
    assert time.perf_counter() - t0 < 30
    assert exc.path.startswith("collaboration.walkthrough.steps[0].view.selectedNodeIds[")
    assert len(str(exc)) < 10_000, "the message stays readable (first problem only)"


# -- unknown ops, odd ids ------------------------------------------------------------------

def test_unknown_ops_are_accepted_view_only(app, client):
    doc = copy.deepcopy(SEED)
    for node in doc["document"]["semantic"]["nodes"]:
        if node["kind"] == "layer":
            node["op"] = "torch.totally_new_op"
    doc["document"]["semantic"]["nodes"].append(
        {"node_id": "mystery", "kind": "layer", "op": "Nonexistent<Op>", "params": {"k": 1}, "metadata": {}})
    doc["document"]["view"]["node_positions"]["mystery"] = {"x": 0, "y": 0}
    snap = parse_snapshot(doc)
    serve(app, {"ops": snap})
    assert client.get("/api/walkthroughs").json()[0]["runnable"] is False
    assert client.get("/api/walkthroughs/ops/tensors").status_code == 409
    assert client.get("/walkthroughs/ops/steps/clip?node=mystery").status_code == 200
    assert_servable(app, client, snap, "ops")


def test_an_unknown_op_on_a_known_node_makes_it_view_only(app, client):
    """The torch model matches a snapshot only if its nodes are the model's: same ids *and* ops.
    Same ids with another op would show ToyGRPO's numbers under a graph that claims other layers."""
    doc = _mutate(SEED, ("document", "semantic", "nodes", 2, "op"), "replace", "torch.nn.Conv2d")
    serve(app, {"conv": parse_snapshot(doc)})
    assert client.get("/api/walkthroughs").json()[0]["runnable"] is False
    assert client.get("/api/walkthroughs/conv/tensors").status_code == 409


TRAVERSAL = ["../../../../etc/passwd", "/etc/passwd", "..\\..\\boot.ini", "C:\\Windows\\win.ini",
             "file:///etc/passwd", "~/.ssh/id_rsa", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "\x00nul", "templates/layouts/base.html"]


def _traversal_snapshot() -> dict:
    """Node ids, step ids, names and params that look like paths; all plain strings."""
    fixed = {"node.input": "../../../../etc/passwd", "node.module": "/etc/passwd", "node.member": "templates/layouts/base.html",
             "node.output": "..\\..\\boot.ini", "step.first": "../../../etc/passwd", "step.second": "/etc/hostname",
             "graph.name": "/etc/passwd", "param.shape": "../../app/settings.py"}
    count = iter(range(10_000))
    return _small_snapshot(lambda field: fixed.get(field) or TRAVERSAL[next(count) % len(TRAVERSAL)] + "#" + field)


def test_path_like_strings_are_never_paths(app, client, monkeypatch, tmp_path):
    snap = parse_snapshot(_traversal_snapshot())
    ids = [n.node_id for n in snap.nodes] + [s.id for s in snap.steps]
    assert any("../" in i for i in ids) and any(i.startswith("/") for i in ids)
    serve(app, {"paths": snap})

    touched: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def record(opener):
        def wrapped(file, *args, **kwargs):
            touched.append(os.fsdecode(file) if isinstance(file, (str, bytes, os.PathLike)) else repr(file))
            return opener(file, *args, **kwargs)
        return wrapped

    from app.web.rendering import templates
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


def test_every_step_is_reachable_by_the_url_the_app_links(app, client):
    """Step ids are plain strings: one containing "/" (e.g. "../x") must still open."""
    snap = parse_snapshot(_traversal_snapshot())
    serve(app, {"paths": snap})
    for step in snap.steps:
        page = client.get(f"/walkthroughs/paths/steps/{quote(step.id, safe='')}")
        assert page.status_code == 200, f"step {step.id!r}: {page.status_code} {page.request.url}"


# -- markup in every text field -----------------------------------------------------------

def payload(field: str) -> str:
    if field.startswith("step."):  # step ids travel in a URL path segment: no "/" (see the test above)
        return f'<script>alert("PWN-{field}")<img src=x onerror="alert(1)">'
    return f'<script>alert("PWN-{field}")</script><img src=x onerror="alert(1)">'


def _small_snapshot(text) -> dict:
    """A valid export whose every free-text field, id and param value is text(field)."""
    base = seed_dict()
    layer_type = copy.deepcopy(base["document"]["semantic"]["nodes"][1]["metadata"]["layerType"])
    layer_type.update(name=text("layer.name"), displayName=text("layer.displayName"),
                      description=text("layer.description"))
    src, mod, fc, sink = text("node.input"), text("node.module"), text("node.member"), text("node.output")
    nodes = [
        {"node_id": src, "kind": "input", "op": text("op.input"), "params": {"shape": text("param.shape")}, "metadata": {}},
        {"node_id": mod, "kind": "module", "op": text("op.module"), "params": {text("param.key"): text("param.value")},
         "metadata": {"isGroup": True, "moduleMembers": [fc], "layerType": layer_type,
                      "moduleTemplateId": text("template")}},
        {"node_id": fc, "kind": "layer", "op": text("op.member"), "params": {"in_features": text("param.in")},
         "metadata": {"parentId": mod, "layerType": layer_type}},
        {"node_id": sink, "kind": "output", "op": text("op.output"), "params": {}, "metadata": {}},
    ]
    edges = [{"edge_id": text(f"edge{i}"), "source_node_id": s, "target_node_id": t}
             for i, (s, t) in enumerate([(src, mod), (src, fc), (mod, sink), (fc, sink)])]
    pos = {src: {"x": 0, "y": 0}, mod: {"x": 250, "y": 40}, fc: {"x": 20, "y": 90}, sink: {"x": 600, "y": 0}}
    connection = json.dumps({"kind": text("conn.kind"), "source": src, "target": fc})
    anchor = {"target": {"kind": "node", "nodeId": fc},
              "context": json.dumps({"connections": [connection], "contents": [{"text": text("anchor.content")}]})}
    steps = [
        {"id": text("step.first"), "title": text("step.title"), "note": text("step.note"),
         "view": {"camera": {"x": 0, "y": 0, "z": 1}, "nodePositions": pos, "expandedModuleIds": [],
                  "selectedNodeIds": [src], "viewport": {"width": 900, "height": 500}}, "anchors": [anchor]},
        {"id": text("step.second"), "title": text("step2.title"), "note": text("step2.note"),
         "view": {"camera": {"x": -100, "y": 20, "z": 1.5}, "nodePositions": pos, "expandedModuleIds": [mod],
                  "selectedNodeIds": [fc], "viewport": {"width": 900, "height": 500}}, "anchors": [anchor]},
    ]
    base["document"]["semantic"].update(nodes=nodes, edges=edges, name=text("graph.name"))
    base["document"]["view"] = {"node_positions": pos, "collapsed_modules": [mod]}
    base["collaboration"] = {"walkthrough": {"title": text("walkthrough.title"), "steps": steps},
                             "savedViews": [], "openingViewId": steps[0]["id"]}
    return base


def test_markup_in_every_text_field_is_escaped(app, client):
    snap = parse_snapshot(_small_snapshot(payload))
    serve(app, {"xss": snap})
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


# -- the folder loader -----------------------------------------------------------------------

BAD_FILES = {
    "truncated.json": SEED_BYTES[: len(SEED_BYTES) // 2],
    "wrong_type.json": json.dumps({**SEED, "document": {**SEED["document"], "schemaVersion": "two"}}).encode(),
    "camera.json": json.dumps(_mutate(SEED, ("collaboration", "walkthrough", "steps", 2, "view", "camera", "z"),
                                      "replace", -1)).encode(),
    "deep.json": _with_raw("top", _nested(1000)).encode(),
    "notutf8.json": b"\xff\xfe\x00{",
    "array.json": b"[]",
}


def test_folder_loader_lists_bad_files_with_errors_and_serves_the_good(tmp_path, caplog):
    (tmp_path / SEED_PATH.name).write_bytes(SEED_BYTES)
    for name, raw in BAD_FILES.items():
        (tmp_path / name).write_bytes(raw)
    (tmp_path / "unknown_ops.json").write_text(json.dumps(_mutate(SEED, ("document", "semantic", "nodes", 1, "op"),
                                                                  "replace", "torch.brand_new")))
    (tmp_path / "paths.json").write_text(json.dumps(_traversal_snapshot()))
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
        assert c.get("/api/walkthroughs/toy_grpo/tensors?step=clip").status_code == 200
        assert c.get("/walkthroughs/toy_grpo/steps/clip").status_code == 200
        assert c.get("/").status_code == 200


@pytest.mark.parametrize("where", ["anchor_context_string", "connection_string"])
def test_folder_loader_survives_deep_json_inside_strings(tmp_path, where):
    """A file the parser cannot handle is one bad entry, not an app that fails to start."""
    (tmp_path / SEED_PATH.name).write_bytes(SEED_BYTES)
    (tmp_path / "deep_string.json").write_text(_with_raw(where, _nested(5000)))
    app = create_app(Settings(device="cpu", walkthroughs_dir=tmp_path, uploads_dir=tmp_path / "up"))
    with TestClient(app, raise_server_exceptions=False) as c:
        items = {w["id"]: w for w in c.get("/api/walkthroughs").json()}
        assert items["deep_string"]["error"].startswith("deep_string.json: ")
        assert c.get("/api/walkthroughs/toy_grpo/tensors").status_code == 200
