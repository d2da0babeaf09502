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


# (step id, viewport w x h, camera x, y, z, selected, expanded): each saved camera is wrong
# for the frame a browser has in its own way; the fit must still frame the selection.
FRAMING_STEPS = [
    ("tiny-viewport", (400, 250), (0, 0, 1.0), "far", []),            # far is 2,600 units right
    ("huge-viewport", (2600, 1600), (-200, 900, 2.0), "top", []),     # camera points below everything
    ("zoomed-in", (1100, 700), (-5000, -5000, 4.0), "mod.deep", ["mod"]),
    ("tall", (300, 1400), (10, 10, 0.5), "mod", ["mod"]),
]


def framing_snapshot() -> dict:
    """A view-only graph spread far apart, with steps whose cameras miss their selection."""
    doc = other_snapshot()
    layer_type = doc["document"]["semantic"]["nodes"][1]["metadata"]["layerType"]
    nodes = [
        {"node_id": "top", "kind": "input", "op": "Input", "params": {}, "metadata": {}},
        {"node_id": "mod", "kind": "module", "op": "Module", "params": {},
         "metadata": {"isGroup": True, "moduleMembers": ["mod.deep"], "layerType": layer_type}},
        {"node_id": "mod.deep", "kind": "layer", "op": "Linear", "params": {"in_features": 2, "out_features": 2},
         "metadata": {"parentId": "mod"}},
        {"node_id": "far", "kind": "output", "op": "Output", "params": {}, "metadata": {}},
    ]
    edges = [
        {"edge_id": "a", "source_node_id": "top", "target_node_id": "mod.deep"},
        {"edge_id": "b", "source_node_id": "mod.deep", "target_node_id": "far"},
    ]
    positions = {"top": {"x": -300, "y": -400}, "mod": {"x": 900, "y": 500}, "mod.deep": {"x": 24, "y": 300},
                 "far": {"x": 2600, "y": 80}}
    doc["document"]["semantic"]["nodes"] = nodes
    doc["document"]["semantic"]["edges"] = edges
    doc["document"]["view"]["node_positions"] = positions
    doc["document"]["view"]["collapsed_modules"] = ["mod"]
    doc["collaboration"]["walkthrough"]["title"] = "Cameras that miss"
    doc["collaboration"]["walkthrough"]["steps"] = [
        {"id": sid, "title": sid, "note": f"Viewport {w} x {h}, camera ({x}, {y}, {z}).",
         "view": {"camera": {"x": x, "y": y, "z": z}, "nodePositions": positions, "expandedModuleIds": expanded,
                  "selectedNodeIds": [selected], "viewport": {"width": w, "height": h}}, "anchors": []}
        for sid, (w, h), (x, y, z), selected, expanded in FRAMING_STEPS]
    doc["collaboration"]["savedViews"] = []
    doc["collaboration"]["openingViewId"] = FRAMING_STEPS[0][0]
    return doc
