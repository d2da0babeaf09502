"""The snapshot model: the seed export reads right; bad files name the field."""

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import SEED_PATH as PATHS_SEED

from app.domain.snapshot import (
    AnchorContext,
    Connection,
    Position,
    Snapshot,
    SnapshotError,
    load_snapshot,
    parse_snapshot,
)

SEED_PATH = PATHS_SEED
SEED = json.loads(SEED_PATH.read_text(encoding="utf-8"))
MODULES = ["policy", "old_policy", "reference_policy", "advantages", "ratio", "clipped", "divergence"]


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    return load_snapshot(SEED_PATH)


def seed() -> dict:
    return copy.deepcopy(SEED)


def test_top_level(snap):
    assert (snap.format, snap.version, snap.document.schema_version) == ("tensorviz.graph", 3, 2)
    assert snap.snapshot_id == "snapshot-d66f9a4e310e2cdc"
    assert snap.exported_at.startswith("2026-09-17")
    assert snap.name == "ToyGRPO"
    assert len(snap.nodes) == 18 and len(snap.edges) == 26
    assert len(snap.node_ids) == 18


def test_modules_members_and_parents(snap):
    assert [m.node_id for m in snap.modules] == MODULES
    assert snap.node("policy").members == ["policy.logits", "policy.log_probabilities"]
    assert snap.node("advantages").members == [] and snap.node("divergence").members == []
    assert snap.node("ratio").members == ["python@ratio#0"]
    assert snap.node("clipped").metadata.module_template_id == "model::ClippedSurrogate"
    assert snap.node("old_policy").metadata.module_template_id == "model::CompletionPolicy"
    assert snap.node("clipped").metadata.module_instance_id == "clipped"
    assert snap.node("python@clipped#0").parent_id == "clipped"
    assert snap.node("reference_policy.log_probabilities").parent_id == "reference_policy"
    assert snap.node("sub@ToyGRPO#0").parent_id is None and not snap.node("sub@ToyGRPO#0").is_module
    assert snap.node("policy.logits").params == {"in_features": 3, "out_features": 4}
    with pytest.raises(KeyError):
        snap.node("nope")


def test_input_node_keeps_declared_shape(snap):
    node = snap.node("input")
    assert (node.kind, node.op, node.params["shape"]) == ("input", "Input", "1,3,224,224")
    assert node.out_ports == ["y"] and node.in_ports == []
    assert node.metadata.layer_type.display_name == "Input"
    assert {p["name"] for p in node.metadata.layer_type.parameters} >= {"shape"}


def test_edges_are_read(snap):
    first = snap.edges[0]
    assert (first.edge_id, first.source_node_id, first.target_node_id) == (
        "edge-1", "policy.logits", "policy.log_probabilities")
    assert (first.source_port, first.target_port) == ("y", "x")


def test_document_view(snap):
    assert snap.document.view.collapsed_modules == MODULES
    assert snap.position("policy") == Position(x=340, y=160)
    # members are stored relative to their module (the graph view adds them up: tests/views)
    assert snap.position("policy.logits") == Position(x=24, y=214)
    assert snap.position("input") == Position(x=0, y=160)


def test_steps(snap):
    assert [s.id for s in snap.steps] == ["policy", "advantages", "clip", "reference"]
    policy = snap.step("policy")
    assert (policy.view.camera.x, policy.view.camera.y, policy.view.camera.z) == (308.5, 6, 1.25)
    assert policy.view.expanded_module_ids == ["policy"]
    assert policy.view.selected_node_ids == ["policy.logits"]
    assert (policy.view.viewport.width, policy.view.viewport.height) == (1100, 700)
    assert policy.title and policy.note
    assert len(policy.view.node_positions) == 18
    assert snap.step("clip").view.expanded_module_ids == ["clipped"]
    assert snap.step("reference").view.selected_node_ids == ["divergence"]
    assert snap.step_index("clip") == 2
    with pytest.raises(KeyError):
        snap.step("nope")


def test_anchor_context_is_parsed(snap):
    anchor = snap.step("clip").anchors[0]
    assert (anchor.target.kind, anchor.target.node_id) == ("node", "clipped")
    assert anchor.snapshot_id == "snapshot-d66f9a4e310e2cdc"
    ctx = anchor.context
    assert isinstance(ctx, AnchorContext)
    assert len(ctx.connections) == 6 and all(isinstance(c, Connection) for c in ctx.connections)
    assert (ctx.connections[0].source, ctx.connections[0].target_port) == ("advantages", "x")
    assert [c["id"] for c in ctx.contents] == ["python@clipped#0"]
    assert ctx.node["id"] == "clipped"


def test_saved_views_and_opening(snap):
    assert snap.collaboration.saved_views[0].id == "advantages"
    assert snap.collaboration.opening_view_id == "advantages"
    assert snap.opening_step_id == "advantages"
    assert snap.collaboration.walkthrough.title


def test_opening_falls_back_to_first_step():
    data = seed()
    data["collaboration"]["savedViews"][0]["id"] = "elsewhere"
    data["collaboration"]["openingViewId"] = "elsewhere"
    assert parse_snapshot(data).opening_step_id == "policy"
    del data["collaboration"]["openingViewId"]
    assert parse_snapshot(data).opening_step_id == "policy"


def test_unknown_fields_are_kept_everywhere():
    data = seed()
    data["future"] = {"a": 1}
    data["document"]["semantic"]["nodes"][0]["newField"] = [1]
    data["document"]["semantic"]["nodes"][1]["metadata"]["layerType"]["extra"] = True
    data["document"]["semantic"]["edges"][0]["weight"] = 2
    step = data["collaboration"]["walkthrough"]["steps"][0]
    step["view"]["camera"]["rotation"] = 0
    step["view"]["zoomHint"] = "fit"
    context = json.loads(step["anchors"][0]["context"])
    context["connections"][0] = json.dumps({**json.loads(context["connections"][0]), "w": 1})
    context["extra"] = 1
    step["anchors"][0]["context"] = json.dumps(context)
    snap = parse_snapshot(data)
    assert snap.model_extra["future"] == {"a": 1} and snap.model_extra["warningCount"] == 0
    assert snap.nodes[0].model_extra["newField"] == [1]
    assert snap.nodes[1].metadata.model_extra["moduleLayerCount"] == 2
    assert snap.edges[0].model_extra == {"metadata": {}, "weight": 2}
    assert snap.steps[0].view.camera.model_extra == {"rotation": 0}
    assert snap.steps[0].anchors[0].context.connections[0].model_extra == {"w": 1}


def test_context_may_already_be_objects():
    data = seed()
    anchor = data["collaboration"]["walkthrough"]["steps"][2]["anchors"][0]
    context = json.loads(anchor["context"])
    context["connections"] = [json.loads(c) for c in context["connections"]]
    context["contents"] = [json.loads(c) for c in context["contents"]]
    anchor["context"] = context
    ctx = parse_snapshot(data).steps[2].anchors[0].context
    assert len(ctx.connections) == 6 and ctx.contents[0]["id"] == "python@clipped#0"


def test_accepts_bytes_and_text():
    raw = SEED_PATH.read_bytes()
    assert parse_snapshot(raw).name == parse_snapshot(raw.decode()).name == "ToyGRPO"


def _step(data, i=2):
    return data["collaboration"]["walkthrough"]["steps"][i]


def _node(data, node_id):
    return next(n for n in data["document"]["semantic"]["nodes"] if n["node_id"] == node_id)


def _set_context(data, mutate):
    anchor = _step(data, 0)["anchors"][0]
    context = json.loads(anchor["context"])
    mutate(context)
    anchor["context"] = json.dumps(context)


def _cycle(data):
    # policy and ratio each claim the other as member (and parent).
    _node(data, "policy")["metadata"]["parentId"] = "ratio"
    _node(data, "ratio")["metadata"]["parentId"] = "policy"
    _node(data, "policy")["metadata"]["moduleMembers"].append("ratio")
    _node(data, "ratio")["metadata"]["moduleMembers"].append("policy")


def _delete(container, key):
    del container[key]


BAD = {
    "wrong format": (lambda d: d.update(format="onnx"), "format: unsupported format 'onnx'"),
    "unsupported version": (lambda d: d.update(version=4),
                            "version: unsupported version 4 (supported: 3)"),
    "unsupported schemaVersion": (lambda d: d["document"].update(schemaVersion=3),
                                  "document.schemaVersion: unsupported schemaVersion 3"),
    "missing camera z": (lambda d: _delete(_step(d)["view"]["camera"], "z"),
                         "collaboration.walkthrough.steps[2].view.camera.z: Field required"),
    "camera z zero": (lambda d: _step(d)["view"]["camera"].update(z=0),
                      "collaboration.walkthrough.steps[2].view.camera.z: 0 is outside [0.001, 1000]"),
    "viewport width negative": (lambda d: _step(d)["view"]["viewport"].update(width=-1),
                                "collaboration.walkthrough.steps[2].view.viewport.width"),
    "unknown node kind": (lambda d: d["document"]["semantic"]["nodes"][0].update(kind="blob"),
                          "document.semantic.nodes[0].kind: unsupported node kind 'blob'"),
    "edge to unknown node": (lambda d: d["document"]["semantic"]["edges"][4].update(source_node_id="nope"),
                             "document.semantic.edges[4].source_node_id: unknown node 'nope'"),
    "unknown module member": (lambda d: _node(d, "ratio")["metadata"]["moduleMembers"].append("ghost"),
                              "document.semantic.nodes[5].metadata.moduleMembers[1]: unknown node 'ghost'"),
    "parent disagrees": (lambda d: _node(d, "python@ratio#0")["metadata"].update(parentId="clipped"),
                         "document.semantic.nodes[16].metadata.parentId: 'clipped', but module "
                         "'ratio' lists 'python@ratio#0' as a member"),
    "member without parentId": (lambda d: _node(d, "python@ratio#0")["metadata"].pop("parentId"),
                                "document.semantic.nodes[16].metadata.parentId: missing, but module"),
    "parent does not list it": (lambda d: _node(d, "output")["metadata"].update(parentId="advantages"),
                                "document.semantic.nodes[9].metadata.parentId: module 'advantages' "
                                "does not list 'output' in moduleMembers"),
    "self membership": (lambda d: (_node(d, "advantages")["metadata"]["moduleMembers"].append("advantages"),
                                   _node(d, "advantages")["metadata"].update(parentId="advantages")),
                        "document.semantic.nodes[4].metadata.parentId: module membership cycle: "
                        "advantages -> advantages"),
    "unknown parent": (lambda d: _node(d, "output")["metadata"].update(parentId="ghost"),
                       "document.semantic.nodes[9].metadata.parentId: unknown node 'ghost'"),
    "parent not a module": (lambda d: _node(d, "output")["metadata"].update(parentId="input"),
                            "document.semantic.nodes[9].metadata.parentId: 'input' is not a module"),
    "membership cycle": (_cycle, "module membership cycle: policy -> ratio -> policy"),
    "collapsed non-module": (lambda d: d["document"]["view"]["collapsed_modules"].append("input"),
                             "document.view.collapsed_modules[7]: 'input' is not a module"),
    "step selects unknown node": (lambda d: _step(d)["view"]["selectedNodeIds"].append("nope"),
                                  "collaboration.walkthrough.steps[2].view.selectedNodeIds[1]: "
                                  "unknown node 'nope'"),
    "step expands a non-module": (lambda d: _step(d)["view"]["expandedModuleIds"].append("policy.logits"),
                                  "collaboration.walkthrough.steps[2].view.expandedModuleIds[1]: "
                                  "'policy.logits' is not a module"),
    "anchor target unknown": (lambda d: _step(d)["anchors"][0]["target"].update(nodeId="nope"),
                              "collaboration.walkthrough.steps[2].anchors[0].target.nodeId: unknown node"),
    "duplicate step id": (lambda d: _step(d).update(id="policy"),
                          "collaboration.walkthrough.steps[2].id: duplicate id 'policy'"),
    "opening view unknown": (lambda d: d["collaboration"].update(openingViewId="nowhere"),
                             "collaboration.openingViewId: 'nowhere' names no step or saved view"),
    "malformed context": (lambda d: _step(d, 0)["anchors"][0].update(context="{not json"),
                          "collaboration.walkthrough.steps[0].anchors[0].context: not valid JSON ("),
    "malformed connection": (lambda d: _set_context(d, lambda c: c["connections"].__setitem__(1, "{x")),
                             "collaboration.walkthrough.steps[0].anchors[0].context.connections[1]: "
                             "not valid JSON ("),
    "duplicate node id": (lambda d: d["document"]["semantic"]["nodes"][3].update(node_id="input"),
                          "document.semantic.nodes[3].node_id: duplicate id 'input'"),
    "saved view checked too": (lambda d: d["collaboration"]["savedViews"][0]["view"]["camera"].update(z=-1),
                               "collaboration.savedViews[0].view.camera.z"),
    "bad position key named": (lambda d: d["document"]["view"]["node_positions"]["python@ratio#0"].pop("x"),
                               'document.view.node_positions["python@ratio#0"].x: Field required'),
}


@pytest.mark.parametrize("case", BAD)
def test_malformed_file_names_the_field(case):
    mutate, expected = BAD[case]
    data = seed()
    mutate(data)
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(data, source="toy.json")
    assert str(info.value).startswith("toy.json: ")
    assert expected in str(info.value)
    assert info.value.errors[0] == (info.value.path, info.value.message)


def test_seed_dict_is_not_mutated_by_parsing():
    data = seed()
    parse_snapshot(data)
    assert data == SEED


def test_error_attributes_and_all_errors_kept():
    data = seed()
    del _step(data)["view"]["camera"]["z"]
    del _step(data, 3)["title"]
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(data, source="toy.json")
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.source, err.path, err.message) == (
        "toy.json", "collaboration.walkthrough.steps[2].view.camera.z", "Field required")
    assert str(err) == "toy.json: collaboration.walkthrough.steps[2].view.camera.z: Field required"
    assert ("collaboration.walkthrough.steps[3].title", "Field required") in err.errors


@pytest.mark.parametrize("raw, expected", [
    ('{"format": "tensorviz.graph",', "<upload>: $: not valid JSON (Expecting property name"),
    ("", "line 1 column 1"),
    (b"\xff\xfe\x00garbage", "$: not valid JSON"),
    ("[1, 2]", "$: top level must be a JSON object, not an array"),
    ('"text"', "$: top level must be a JSON object, not a string"),
])
def test_bad_json_text(raw, expected):
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(raw)
    assert expected in str(info.value)
    assert info.value.path == "$"


def test_load_snapshot_names_the_file(tmp_path):
    bad = tmp_path / "broken.tensorviz.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(SnapshotError, match=r"^broken\.tensorviz\.json: \$: not valid JSON"):
        load_snapshot(bad)


def _paths(value, prefix=()):
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, prefix + (key,))


SEED_PATHS = [p for p in _paths(SEED) if p]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(SEED_PATHS), value=JSON_VALUES)
def test_any_mutation_is_loaded_or_refused_cleanly(path, value):
    data = seed()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    try:
        parse_snapshot(data, source="fuzz.json")
    except SnapshotError as err:  # anything else escaping is the bug under test
        assert str(err).startswith("fuzz.json: ") and err.path and err.message
