"""Test snapshots built from the seed: a hostile-but-valid one with other nodes and steps."""
import copy
import json

from paths import SEED_PATH  # noqa: F401  (re-exported for the tests that import it from here)


def seed_dict() -> dict:
    return json.loads(SEED_PATH.read_text())


def other_snapshot() -> dict:
    """A different graph: three nodes, one module with a member, two steps, <script> in notes."""
    base = seed_dict()
    layer_type = base["document"]["semantic"]["nodes"][1]["metadata"]["layerType"]
    nodes = [
        {"node_id": "src", "kind": "input", "op": "Input", "params": {"shape": "2,5"}, "metadata": {}},
        {"node_id": "block<b>", "kind": "module", "op": "Module", "params": {},
         "metadata": {"isGroup": True, "moduleMembers": ["block<b>.fc"], "layerType": layer_type}},
        {"node_id": "block<b>.fc", "kind": "layer", "op": "Linear", "params": {"in_features": 5, "out_features": 2},
         "metadata": {"parentId": "block<b>"}},
        {"node_id": "sink", "kind": "output", "op": "Output", "params": {}, "metadata": {}},
    ]
    edges = [
        {"edge_id": "e1", "source_node_id": "src", "target_node_id": "block<b>"},
        {"edge_id": "e2", "source_node_id": "src", "target_node_id": "block<b>.fc"},
        {"edge_id": "e3", "source_node_id": "block<b>", "target_node_id": "sink"},
        {"edge_id": "e4", "source_node_id": "block<b>.fc", "target_node_id": "sink"},
    ]
    positions = {"src": {"x": 0, "y": 0}, "block<b>": {"x": 250, "y": 40}, "block<b>.fc": {"x": 20, "y": 90},
                 "sink": {"x": 600, "y": 0}}
    steps = [
        {"id": "first", "title": "First <i>look</i>", "note": "Note with <script>alert('x')</script> & more",
         "view": {"camera": {"x": 50, "y": 100, "z": 1}, "nodePositions": positions, "expandedModuleIds": [],
                  "selectedNodeIds": ["src"], "viewport": {"width": 900, "height": 500}}, "anchors": []},
        {"id": "second", "title": "Second", "note": "Inside the block",
         "view": {"camera": {"x": -100, "y": 20, "z": 1.5}, "nodePositions": positions,
                  "expandedModuleIds": ["block<b>"], "selectedNodeIds": ["block<b>.fc"],
                  "viewport": {"width": 900, "height": 500}}, "anchors": []},
    ]
    doc = copy.deepcopy(base)
    doc["document"]["semantic"]["nodes"] = nodes
    doc["document"]["semantic"]["edges"] = edges
    doc["document"]["semantic"]["name"] = "Other<Graph>"
    doc["document"]["view"] = {"node_positions": positions, "collapsed_modules": ["block<b>"]}
    doc["collaboration"] = {"walkthrough": {"title": "Another <em>walkthrough</em>", "steps": steps},
                            "savedViews": [], "openingViewId": "first"}
    return doc
