"""`python -m app.export` on ToyGRPO, checked against the user's own export (the seed).

What must equal the seed: the node ids, each node's kind and op, module membership
(moduleMembers and parentId, both sides), the module templates, and the edges at both
levels. Edges are compared as sets of (source, target) node ids: edge ids, ports and
order are normalised away by that comparison (they happen to match too, which a second
test pins as a list). What is not the seed's, on purpose: positions (a layered layout,
not the seed's one long row), cameras (computed to frame each step), the input's shape
(traced: 1,3, where the seed has the palette default 1,3,224,224), snapshotId (a hash).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from bs4 import BeautifulSoup
from paths import ROOT, SEED_PATH

from app.domain.snapshot import parse_snapshot
from app.export.__main__ import TARGETS
from app.export.document import build_document, export, render, timestamp, trace_graph
from app.export.layout import NODE_HEIGHT, NODE_WIDTH, layout
from app.export.steps import read_steps
from app.kinds.toy.engine.node_map import is_runnable
from app.views import graph_layout
from app.views.graph import build_graph_view

STEPS = ROOT / "walkthroughs" / "steps" / "toy_grpo.steps.json"
STAMP = "2026-09-17T07:02:39.684264+00:00"  # the seed's exportedAt


@pytest.fixture(scope="module")
def exported():
    text = export(TARGETS["toy_grpo"], read_steps(STEPS), STAMP)
    return text, parse_snapshot(text, source="export")  # the app's own loader: no error


@pytest.fixture(scope="module")
def seed():
    return parse_snapshot(SEED_PATH.read_bytes(), source=SEED_PATH.name)


def edge_set(snapshot):
    return {(e.source_node_id, e.target_node_id) for e in snapshot.edges}


def test_same_nodes_with_the_same_kinds_and_ops(exported, seed):
    _, snap = exported
    assert snap.node_ids == seed.node_ids
    assert {n.node_id: (n.kind, n.op) for n in snap.nodes} == {n.node_id: (n.kind, n.op) for n in seed.nodes}
    assert [n.node_id for n in snap.nodes] == [n.node_id for n in seed.nodes]  # file order too


def test_same_module_membership_and_templates(exported, seed):
    _, snap = exported

    def membership(s):
        return {n.node_id: (n.is_module, sorted(n.members), n.parent_id, n.metadata.module_template_id,
                            n.metadata.module_instance_id) for n in s.nodes}
    assert membership(snap) == membership(seed)
    assert snap.document.view.collapsed_modules == seed.document.view.collapsed_modules


def test_same_edges_at_both_levels(exported, seed):
    _, snap = exported
    assert edge_set(snap) == edge_set(seed)
    # both levels really are there: a member-level edge and its module-level summary
    assert {("input", "policy.logits"), ("input", "policy"), ("python@ratio#0", "python@clipped#0"),
            ("ratio", "clipped")} <= edge_set(snap)


def test_edges_params_palette_and_anchor_contexts_match_the_seed_exactly(exported):
    text, _ = exported
    mine, theirs = json.loads(text), json.loads(SEED_PATH.read_text())
    assert mine["document"]["semantic"]["edges"] == theirs["document"]["semantic"]["edges"]  # ids and order too
    for a, b in zip(mine["document"]["semantic"]["nodes"], theirs["document"]["semantic"]["nodes"], strict=True):
        if a["kind"] != "input":  # the input's shape is traced, see the module docstring
            assert a == b
    for a, b in zip(mine["collaboration"]["walkthrough"]["steps"], theirs["collaboration"]["walkthrough"]["steps"],
                    strict=True):
        assert (a["id"], a["title"], a["note"]) == (b["id"], b["title"], b["note"])
        assert a["view"]["expandedModuleIds"] == b["view"]["expandedModuleIds"]
        assert a["view"]["selectedNodeIds"] == b["view"]["selectedNodeIds"]
        assert [json.loads(x["context"]) for x in a["anchors"]] == [json.loads(x["context"]) for x in b["anchors"]]
    assert mine["collaboration"]["openingViewId"] == theirs["collaboration"]["openingViewId"]
    assert [v["id"] for v in mine["collaboration"]["savedViews"]] == ["advantages"]


def test_the_input_declares_its_traced_shape(exported):
    _, snap = exported
    assert snap.node("input").params["shape"] == "1,3"


def test_the_export_is_runnable_by_the_engine(exported):
    _, snap = exported
    assert is_runnable(snap)


def test_layout_constants_are_the_renderers():
    """The file's boxes are the renderer's smallest box (the app lays every view out with dot,
    growing a box to its text, so the file's positions only serve other readers of the format)."""
    assert (NODE_WIDTH, NODE_HEIGHT) == (graph_layout.NODE_WIDTH, graph_layout.NODE_HEIGHT)


def file_boxes(expanded):
    """The boxes the file's positions describe (the exporter's own geometry, app/export/layout.py)."""
    graph, _ = trace_graph(TARGETS["toy_grpo"])
    return layout(graph, expanded)[1]


def test_each_camera_frames_its_selected_and_expanded_nodes(exported):
    """The file is self-consistent: each step's saved camera frames its selected and expanded
    boxes as the file's positions place them, inside the step's viewport."""
    _, snap = exported
    for step in snap.steps:
        view = step.view
        boxes = file_boxes(view.expanded_module_ids)
        z, cx, cy = view.camera.z, view.camera.x, view.camera.y
        for node_id in [*view.selected_node_ids, *view.expanded_module_ids]:
            x, y, w, h = boxes[node_id]
            left, top = x * z + cx, y * z + cy
            right, bottom = (x + w) * z + cx, (y + h) * z + cy
            assert 0 <= left and right <= view.viewport.width and 0 <= top and bottom <= view.viewport.height, step.id


def test_open_modules_overlap_nothing(exported):
    """Each step is laid out with its modules open, in the file and as the app draws it (dot):
    no two top-level boxes overlap."""
    _, snap = exported
    for step in snap.steps:
        view = step.view
        drawn = build_graph_view(snap, view.expanded_module_ids, [])
        stored = file_boxes(view.expanded_module_ids)
        for top in ([(n.id, (n.x, n.y, n.width, n.height)) for n in drawn.nodes if n.parent_id is None],
                    [(n, b) for n, b in stored.items() if snap.node(n).parent_id is None]):
            for i, (a, ba) in enumerate(top):
                for b, bb in top[i + 1:]:
                    apart = (ba[0] + ba[2] <= bb[0] or bb[0] + bb[2] <= ba[0] or ba[1] + ba[3] <= bb[1]
                             or bb[1] + bb[3] <= ba[1])
                    assert apart, (step.id, a, b)


def test_exports_are_deterministic():
    target, steps = TARGETS["toy_grpo"], read_steps(STEPS)
    assert export(target, steps, STAMP) == export(target, steps, STAMP)
    graph, name = trace_graph(target)
    again = render(build_document(graph, name, steps, STAMP))
    assert again == export(target, steps, STAMP)


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "app.export", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def test_cli_writes_a_loadable_file_byte_identical_twice(tmp_path):
    # Each run costs seconds of torch import: two runs, each compared with an in-process export.
    outs = [tmp_path / "a" / "toy.tensorviz.json", tmp_path / "c.tensorviz.json"]
    runs = [run_cli("--model", "toy_grpo", "--steps", STEPS, "--out", outs[0], "--exported-at", STAMP),
            run_cli("--model", "toy_grpo", "--steps", STEPS, "--out", outs[1], env={"SOURCE_DATE_EPOCH": "1789635759"})]
    assert all(r.returncode == 0 and "wrote" in r.stdout for r in runs), [r.stderr for r in runs]
    a, c = (out.read_bytes() for out in outs)
    assert a == export(TARGETS["toy_grpo"], read_steps(STEPS), STAMP).encode()
    parse_snapshot(a)
    # SOURCE_DATE_EPOCH fixes exportedAt for reproducible builds; nothing else depends on it
    stamp = timestamp(1789635759)
    assert json.loads(c)["exportedAt"] == stamp == "2026-09-17T09:02:39+00:00"
    assert c == a.replace(STAMP.encode(), stamp.encode())


def test_cli_help_and_errors(tmp_path):
    helped = run_cli("--help")
    assert helped.returncode == 0 and "--model" in helped.stdout and "toy_grpo" in helped.stdout
    bad = tmp_path / "bad.steps.json"
    bad.write_text(json.dumps({"steps": [{"id": "x", "title": "X", "selected": ["nope"]}]}))
    failed = run_cli("--model", "toy_grpo", "--steps", bad, "--out", tmp_path / "x.json")
    assert failed.returncode == 1 and "steps[0].selected[0]: unknown node 'nope'" in failed.stderr
    assert not (tmp_path / "x.json").exists()
    unknown = run_cli("--model", "gpt5", "--steps", STEPS, "--out", tmp_path / "y.json")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_the_app_serves_the_export_as_a_walkthrough(exported, tmp_path, make_client):
    text, snap = exported
    folder = tmp_path / "walkthroughs"
    folder.mkdir()
    (folder / "exported_toy.tensorviz.json").write_text(text)
    shutil.copy(SEED_PATH, folder / SEED_PATH.name)  # the user's file stays beside it, untouched
    client = make_client(walkthroughs_dir=folder, follow_redirects=False)
    assert {w["id"] for w in client.get("/api/walkthroughs").json()} >= {"exported_toy", "toy_grpo"}
    for step in snap.steps:
        page = client.get(f"/walkthroughs/exported_toy/steps/{step.id}")
        assert page.status_code == 200, step.id
        html = BeautifulSoup(page.text, "html.parser")
        assert html.select_one("#step-export-title").get_text() == step.title
        assert [n["data-node-id"] for n in html.select(".graph .node.selected")] == step.view.selected_node_ids
        # the camera frames the selection as dot lays the view out (not the file's saved camera,
        # which framed the file's positions): readable zoom, the selected box inside the viewport
        x, y, z = (float(v) for v in re.findall(r"-?[\d.]+", html.select_one("#camera")["transform"]))
        assert 1 <= z <= 1.25, step.id
        for rect in html.select(".graph .node.selected > rect"):
            left, top = float(rect["x"]) * z + x, float(rect["y"]) * z + y
            right, bottom = left + float(rect["width"]) * z, top + float(rect["height"]) * z
            assert 0 <= left < right <= step.view.viewport.width and 0 <= top < bottom <= step.view.viewport.height
    tensors = client.get("/api/walkthroughs/exported_toy/step", params={"node": "sub@ToyGRPO#0"})
    assert tensors.status_code == 200 and list(tensors.json()["nodes"]) == ["sub@ToyGRPO#0"]
