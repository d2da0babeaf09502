"""Hostile snapshots and the checks around them, shared by the snapshot fuzz (tests/domain)
and the serving of hostile snapshots (tests/web).

A refusal names a field: "<source>: <path>: <why>", the path being "$" or a JSON path such as
document.semantic.nodes[3].metadata.parentId or document.view.node_positions["python@ratio#0"].x.
"""
from __future__ import annotations

import copy
import json
import re
from urllib.parse import quote

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from snapshots import seed_dict

from app.domain.catalog import Catalog, CatalogEntry
from app.domain.snapshot import Snapshot, SnapshotError, parse_snapshot
from app.house import create_app
from app.web.settings import Settings

SEED = seed_dict()


def swappable_client(tmp_path_factory):
    """A client of one app whose catalog tests swap (`serve`), for a module-scoped fixture.

    The whole-response cache is off: it would replay a previous catalog's answers for the same URL."""
    empty = tmp_path_factory.mktemp("empty")
    app = create_app(Settings(device="cpu", walkthroughs_dir=empty, uploads_dir=tmp_path_factory.mktemp("up"),
                              response_cache_mb=0))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


# "<source>: <path>: <message>", the path being "$" or a JSON path such as
# document.semantic.nodes[3].metadata.parentId or document.view.node_positions["python@ratio#0"].x;
# a top-level key that is not an identifier follows a "$": $["\ud800"]
PATH_RE = re.compile(r'^(\$|(?:[A-Za-z_][A-Za-z0-9_]*|\$(?=\[))(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*)$')


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


def serve(client: TestClient, snapshots: dict[str, Snapshot]) -> None:
    client.app.state.catalog = Catalog([CatalogEntry(i, f"{i}.json", s, None) for i, s in snapshots.items()])


def served_urls(wid: str, snap: Snapshot) -> list[str]:
    """Everything a browser or client can ask about one snapshot."""
    urls = [f"/api/walkthroughs/{wid}", f"/api/walkthroughs/{wid}/step", f"/walkthroughs/{wid}"]
    for step in snap.steps:
        s = quote(step.id, safe="")
        urls += [f"/walkthroughs/{wid}/steps/{s}", f"/api/walkthroughs/{wid}/step?step={quote(step.id)}"]
    modules = ",".join(m.node_id for m in snap.modules)
    first = quote(snap.steps[0].id, safe="")
    urls.append(f"/walkthroughs/{wid}/steps/{first}?expanded={quote(modules)}")
    for node in snap.nodes[:40]:
        urls.append(f"/walkthroughs/{wid}/steps/{first}?node={quote(node.node_id)}")
    return urls


def assert_servable(client, snap: Snapshot, wid: str = "fz", fragment_too: bool = False,
                    light: bool = False) -> None:
    serve(client, {wid: snap})
    urls = served_urls(wid, snap)
    if light:  # summary, tensors, the opening page, every step fragment... and a node page
        urls = urls[:3] + [u for u in urls if "tensors?step=" in u] + urls[-1:]
    for url in urls:
        for headers in ([{}, {"HX-Request": "true"}] if fragment_too else [{}]):
            r = client.get(url, headers=headers)
            assert r.status_code < 500, f"GET {url} -> {r.status_code}: {r.text[:300]}"


def all_paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from all_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from all_paths(v, (*prefix, i))


def mutate(doc, path, action, value):
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


def node(doc, node_id):
    return next(n for n in doc["document"]["semantic"]["nodes"] if n["node_id"] == node_id)


def nested(depth: int, kind: str = "list") -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


def with_raw(fragment_at: str, deep_json: str) -> str:
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


def raw_with_literal(path: tuple, literal: str) -> str:
    """The seed's JSON text with a raw JSON literal at ``path``: what json.dumps cannot write
    (NaN is allowed by it, but not 5,000 digits or a lone surrogate escape)."""
    doc = copy.deepcopy(SEED)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = "__LITERAL__"
    return json.dumps(doc).replace('"__LITERAL__"', literal)


_STEP = ("collaboration", "walkthrough", "steps", 2)
# name: (JSON text, the field its refusal names); each was a 500 (or a stuck start-up) once
ODD_VALUES = {
    "big_int": (raw_with_literal(("document", "semantic", "nodes", 1, "params", "n"), "9" * 5000),
                "document.semantic.nodes[1].params.n"),
    "surrogate_title": (raw_with_literal(("collaboration", "walkthrough", "title"), '"GRPO \\ud800"'),
                        "collaboration.walkthrough.title"),
    "surrogate_key": (json.dumps({**SEED, "\udc00": 1}), '$["\\udc00"]'),
    "far_position": (raw_with_literal(("document", "view", "node_positions", "input", "x"), "1e308"),
                     "document.view.node_positions.input.x"),
    "far_camera": (raw_with_literal((*_STEP, "view", "camera", "x"), "-1e308"),
                   "collaboration.walkthrough.steps[2].view.camera.x"),
    "nan_param": (raw_with_literal(("document", "semantic", "nodes", 1, "params", "n"), "NaN"),
                  "document.semantic.nodes[1].params.n"),
    "infinite_zoom": (raw_with_literal((*_STEP, "view", "camera", "z"), "Infinity"),
                      "collaboration.walkthrough.steps[2].view.camera.z"),
    "huge_viewport": (raw_with_literal((*_STEP, "view", "viewport", "width"), "1e300"),
                      "collaboration.walkthrough.steps[2].view.viewport.width"),
    # GET /walkthroughs/x redirected to /walkthroughs/x/steps/.., which clients resolve to /walkthroughs/x
    "dot_dot_step": (json.dumps({**SEED, "collaboration": {
        **SEED["collaboration"], "openingViewId": "..",
        "walkthrough": {**SEED["collaboration"]["walkthrough"], "steps": [
            {**step, "id": ".."} if i == 1 else step
            for i, step in enumerate(SEED["collaboration"]["walkthrough"]["steps"])]}}}),
        "collaboration.walkthrough.steps[1].id"),
}


TRAVERSAL = ["../../../../etc/passwd", "/etc/passwd", "..\\..\\boot.ini", "C:\\Windows\\win.ini",
             "file:///etc/passwd", "~/.ssh/id_rsa", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "\x00nul", "templates/layouts/base.html"]


def traversal_snapshot() -> dict:
    """Node ids, step ids, names and params that look like paths; all plain strings."""
    fixed = {"node.input": "../../../../etc/passwd", "node.module": "/etc/passwd", "node.member": "templates/layouts/base.html",
             "node.output": "..\\..\\boot.ini", "step.first": "../../../etc/passwd", "step.second": "/etc/hostname",
             "graph.name": "/etc/passwd", "param.shape": "../../app/settings.py"}
    count = iter(range(10_000))
    return small_snapshot(lambda field: fixed.get(field) or TRAVERSAL[next(count) % len(TRAVERSAL)] + "#" + field)


def payload(field: str) -> str:
    if field.startswith("step."):  # step ids travel in a URL path segment: no "/" (see the test above)
        return f'<script>alert("PWN-{field}")<img src=x onerror="alert(1)">'
    return f'<script>alert("PWN-{field}")</script><img src=x onerror="alert(1)">'


def small_snapshot(text) -> dict:
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
