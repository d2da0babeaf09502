"""app/views/graph.py + graph_layout.py + graph_dot.py (dot layout, edge folding, camera) and
templates/partials/graph.html."""
from __future__ import annotations

import copy
import itertools
import json
import pathlib
import xml.etree.ElementTree as ET

import jinja2
import pytest

from app.domain.snapshot import load_snapshot, parse_snapshot
from app.views.graph import Camera, build_graph_view
from app.views.graph_layout import (
    NODE_HEIGHT,
    NODE_WIDTH,
    ancestors,
    edge_box_crossings,
    representative,
    visible_node_ids,
)
from app.views.numbers import coordinate as fmt

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = ROOT / "walkthroughs" / "toy_grpo.tensorviz.json"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def seed():
    return load_snapshot(SEED)


def step_view(snap, step_id, **kw):
    view = snap.step(step_id).view
    return build_graph_view(snap, view.expanded_module_ids, view.selected_node_ids,
                            framed=view.selected_node_ids, viewport=(view.viewport.width, view.viewport.height), **kw)


def boxes(graph):
    return {n.id: (n.x, n.y, n.width, n.height) for n in graph.nodes}


def overlap(a, b):
    return a.x < b.x + b.width and b.x < a.x + a.width and a.y < b.y + b.height and b.y < a.y + a.height


def to_screen(camera, x, y):
    """screen = world * z + (x, y): the export's camera convention (docs/design.md §2)."""
    return x * camera.z + camera.x, y * camera.z + camera.y


def pairs(graph):
    return {(e.source, e.target) for e in graph.edges}


# -- the seed ---------------------------------------------------------------------

OPENING_EDGES = {
    ("input", "policy"), ("input", "old_policy"), ("input", "reference_policy"), ("input", "advantages"),
    ("policy", "ratio"), ("old_policy", "ratio"), ("ratio", "clipped"), ("advantages", "clipped"),
    ("policy", "divergence"), ("reference_policy", "divergence"), ("clipped", "sub@ToyGRPO#0"),
    ("divergence", "sub@ToyGRPO#0"), ("sub@ToyGRPO#0", "output")}


def test_opening_all_collapsed(seed):
    graph = build_graph_view(seed, [], [])
    assert [n.id for n in graph.nodes] == ["input", "policy", "old_policy", "reference_policy",
                                           "advantages", "ratio", "clipped", "divergence",
                                           "sub@ToyGRPO#0", "output"]
    assert len(graph.edges) == 13 and pairs(graph) == OPENING_EDGES
    # at least the 150 x 60 box, wider where the text needs it (the name is never squeezed)
    assert all(n.width >= NODE_WIDTH and n.height == NODE_HEIGHT for n in graph.nodes)
    assert graph.node("reference_policy").width > NODE_WIDTH
    assert graph.node("policy").member_count == 2 and not graph.node("policy").expanded


def test_edge_to_a_member_of_a_collapsed_module_folds_to_the_module(seed):
    graph = build_graph_view(seed, [], [])
    edge = next(e for e in graph.edges if e.id == "input->policy")
    assert edge.edge_ids == ("edge-4", "edge-5")  # input → policy.logits, input → policy
    # policy.log_probabilities → python@ratio#0 is drawn between the two modules
    assert "edge-11" in next(e for e in graph.edges if e.id == "policy->ratio").edge_ids
    # an edge wholly inside one collapsed module disappears
    assert not any("edge-1" in e.edge_ids for e in graph.edges)


def test_policy_step_opens_policy_and_drops_its_summaries(seed):
    graph = step_view(seed, "policy")
    logits, logp = graph.node("policy.logits"), graph.node("policy.log_probabilities")
    assert logits.y + logits.height < logp.y  # dot's layers run top to bottom, the flow's way
    assert logits.selected and logits.depth == 1 and logits.parent_id == "policy"
    assert logits.short_label == "logits" and logits.label == "policy.logits"
    got = pairs(graph)
    assert {("input", "policy.logits"), ("policy.logits", "policy.log_probabilities"),
            ("policy.log_probabilities", "ratio"), ("policy.log_probabilities", "divergence")} <= got
    assert not {("input", "policy"), ("policy", "ratio"), ("policy", "divergence")} & got
    # the container (dot's cluster) encloses its members, with its header above them
    policy = graph.node("policy")
    assert policy.expanded and policy.is_container
    for member in (logits, logp):
        assert policy.x < member.x and member.x + member.width < policy.x + policy.width
        assert policy.y + NODE_HEIGHT - 10 <= member.y and member.y + member.height < policy.y + policy.height
    assert graph.nodes[0].id == "policy"  # drawn behind its members
    assert len(graph.nodes) == 12 and len(graph.edges) == 14


def test_clip_step_draws_the_python_member(seed):
    graph = step_view(seed, "clip")
    assert "python@clipped#0" in graph.node_ids
    got = pairs(graph)
    assert {("ratio", "python@clipped#0"), ("advantages", "python@clipped#0"),
            ("python@clipped#0", "sub@ToyGRPO#0")} <= got
    assert not {("ratio", "clipped"), ("advantages", "clipped"), ("clipped", "sub@ToyGRPO#0")} & got


def test_edge_paths_are_dots_splines_from_box_to_box(seed):
    for step in seed.steps:
        graph = step_view(seed, step.id)
        for edge in graph.edges:
            src, dst = graph.node(edge.source), graph.node(edge.target)
            assert edge.path.startswith("M") and " C" in edge.path
            numbers = [float(v) for v in edge.path.replace("M", " ").replace("C", " ").replace("L", " ").split()]
            (x0, y0), (x1, y1) = numbers[:2], numbers[-2:]
            # leaves on (or at) its source's border, ends at the target's border (arrow tip)
            assert src.x - 1 <= x0 <= src.x + src.width + 1 and src.y - 1 <= y0 <= src.y + src.height + 1
            assert dst.x - 1 <= x1 <= dst.x + dst.width + 1 and dst.y - 1 <= y1 <= dst.y + dst.height + 1
        # no edge runs through a box that is neither its end nor a module holding an end
        assert edge_box_crossings(seed, graph.edges, boxes(graph)) == [], step.id


def test_no_two_boxes_overlap_unless_one_holds_the_other(seed):
    for step in seed.steps:
        graph = step_view(seed, step.id)
        for a, b in itertools.combinations(graph.nodes, 2):
            if a.id in ancestors(seed, b.id) or b.id in ancestors(seed, a.id):
                continue
            assert not overlap(a, b), (step.id, a.id, b.id)


def test_an_open_module_without_members_keeps_its_summary_edges(seed):
    graph = step_view(seed, "advantages")
    adv = graph.node("advantages")
    assert adv.expanded and not adv.is_container and adv.width >= NODE_WIDTH
    assert {("input", "advantages"), ("advantages", "clipped")} <= pairs(graph)


@pytest.mark.parametrize("step_id", ["policy", "advantages", "clip", "reference"])
def test_each_step_camera_frames_its_selection_and_neighbours_readably(seed, step_id):
    """Without script the camera frames the selection and its direct neighbours in the step's
    viewport, at a zoom where 11-unit text is at least 11 px (the saved cameras framed the
    author's layout, which dot replaces; docs/design.md §2, "Graph layout")."""
    graph = step_view(seed, step_id)
    assert (graph.viewport_width, graph.viewport_height) == (1100, 700)
    assert 1 <= graph.camera.z <= 1.25
    selected = [n for n in graph.nodes if n.selected]
    assert [n.id for n in selected] == seed.step(step_id).view.selected_node_ids
    assert set(graph.framed_ids) == {n.id for n in selected}
    # a framed open module brings its members, and the members' neighbours, too
    core = set(graph.framed_ids) | {n.id for n in graph.nodes if n.parent_id in graph.framed_ids}
    neighbours = {e.target for e in graph.edges if e.source in core} | \
                 {e.source for e in graph.edges if e.target in core}
    assert set(graph.context_ids) == core | neighbours
    for node in [graph.node(n) for n in graph.context_ids]:
        left, top = to_screen(graph.camera, node.x, node.y)
        right, bottom = to_screen(graph.camera, node.x + node.width, node.y + node.height)
        assert 0 <= left < right <= 1100 and 0 <= top < bottom <= 700, (step_id, node.id, left, top, right, bottom)


def declaring(node_id: str, shape: str):
    """The seed with `node_id` declaring `shape` (the file's input declares its palette's default)."""
    raw = json.loads(SEED.read_text())
    node = next(n for n in raw["document"]["semantic"]["nodes"] if n["node_id"] == node_id)
    node["params"]["shape"] = shape
    return parse_snapshot(raw)


def test_a_shape_warning_only_where_the_file_means_another_shape(seed):
    graph = build_graph_view(seed, [], [], shapes={"input": [1, 3], "policy": (1, 4)})
    node = graph.node("input")
    assert node.declared_shape == "1,3,224,224" and node.shape == (1, 3)
    # an input's declared shape is the export's example (here its palette's default; the real model's,
    # the shape the exporter traced): no alarm on the graph, the inspector says it as information
    assert node.shape_warning is None
    assert build_graph_view(declaring("input", "2,7"), [], [], shapes={"input": (8, 40)}).node("input").shape_warning is None
    assert graph.node("policy").shape_warning is None and graph.node("policy").shape == (1, 4)
    # a node the file gives another shape than the model computes is warned about
    other = declaring("advantages", "1,5")
    assert build_graph_view(other, [], [], shapes={"advantages": (8,)}).node("advantages").shape_warning == \
        "declared 1,5 but traced (8,)"
    assert build_graph_view(other, [], [], shapes={"advantages": (1, 5)}).node("advantages").shape_warning is None
    assert build_graph_view(other, [], []).node("advantages").shape_warning is None  # nothing traced


def test_numbers_camera_and_defaults(seed):
    assert [fmt(v) for v in (308.5, 6.0, 1.25, -1770, -0.0, 1 / 3)] == ["308.5", "6", "1.25", "-1770", "0", "0.333333"]
    assert Camera(1, 2, 0.5).transform() == "translate(1 2) scale(0.5)"
    graph = build_graph_view(seed, ["policy", "no-such-module"], ["no-such-node"])
    assert graph.framed_ids == () and graph.node("policy").is_container
    left, top = to_screen(graph.camera, graph.bounds[0], graph.bounds[1])
    right, bottom = to_screen(graph.camera, graph.bounds[2], graph.bounds[3])
    assert 0 <= left < right <= 1100 and 0 <= top < bottom <= 700  # nothing to frame: all of it fitted
    # the same view is the same layout (and one dot run, cached); another set of open modules is not
    again = build_graph_view(seed, ["policy"], [])
    assert again.layout_key == graph.layout_key and again.node("policy") == graph.node("policy")
    assert build_graph_view(seed, [], []).layout_key != graph.layout_key


def test_ancestors_and_visibility_unchanged(seed):
    assert ancestors(seed, "policy.logits") == ["policy"] and ancestors(seed, "input") == []
    assert "policy.logits" not in visible_node_ids(seed, [])
    assert "policy.logits" in visible_node_ids(seed, ["policy"])


# -- a synthetic, three-level snapshot ---------------------------------------------

def node(node_id, kind="layer", op="Linear", parent=None, members=(), **params):
    meta = {"parentId": parent} if parent else {}
    if kind == "module":
        meta.update(isGroup=True, moduleMembers=list(members))
    return {"node_id": node_id, "kind": kind, "op": op, "params": params, "metadata": meta}


def synthetic(nodes, edges, positions, name="nested"):
    return {
        "format": "tensorviz.graph", "version": 3,
        "document": {"schemaVersion": 2,
                     "semantic": {"name": name, "nodes": nodes,
                                  "edges": [{"edge_id": f"e{i}", "source_node_id": s, "target_node_id": t}
                                            for i, (s, t) in enumerate(edges)]},
                     "view": {"node_positions": positions}},
        "collaboration": {"walkthrough": {"title": "t", "steps": [{
            "id": "only", "title": "Only", "view": {"camera": {"x": 0, "y": 0, "z": 1},
                                                    "viewport": {"width": 800, "height": 600}}}]}},
    }


NESTED = synthetic(
    [node("in", "input", "Input", shape="2,3"),
     node("outer", "module", "Module", members=["outer.a", "mid"]),
     node("outer.a", parent="outer"),
     node("mid", "module", "Module", parent="outer", members=["mid.b", "inner"]),
     node("mid.b", parent="mid"),
     node("inner", "module", "Module", parent="mid", members=["inner.c"]),
     node("inner.c", parent="inner"),
     node("side", "module", "Module", members=["side.s"]),
     node("side.s", parent="side"),
     node("out", "output", "Output")],
    [("in", "outer"), ("in", "outer.a"), ("outer.a", "mid.b"), ("in", "mid.b"), ("mid.b", "inner.c"),
     ("mid", "inner.c"), ("outer", "mid.b"), ("inner.c", "out"), ("inner", "out"), ("mid", "out"),
     ("outer", "out"), ("outer.a", "side.s"), ("outer", "side"), ("side.s", "out"), ("in", "inner.c"),
     ("inner.c", "mid.b"), ("outer.a", "outer.a")],
    # side.s and out have no position: they must still be placed
    {"in": {"x": 0, "y": 0}, "outer": {"x": 200, "y": 0}, "outer.a": {"x": 24, "y": 80},
     "mid": {"x": 24, "y": 170}, "mid.b": {"x": 24, "y": 80}, "inner": {"x": 200, "y": 80},
     "inner.c": {"x": 24, "y": 80}, "side": {"x": 900, "y": 0}})

MODULES = ["outer", "mid", "inner", "side"]
COMBINATIONS = [list(c) for r in range(len(MODULES) + 1) for c in itertools.combinations(MODULES, r)]


@pytest.fixture(scope="module")
def nested():
    return parse_snapshot(copy.deepcopy(NESTED))


@pytest.mark.parametrize("expanded", COMBINATIONS, ids=lambda c: "+".join(c) or "none")
def test_folding_properties_at_every_expansion(nested, expanded):
    graph = build_graph_view(nested, expanded, ["inner.c"])
    drawn = set(graph.node_ids)
    assert drawn == set(visible_node_ids(nested, expanded))
    assert len(graph.node_ids) == len(drawn)
    keys = [(e.source, e.target) for e in graph.edges]
    assert len(keys) == len(set(keys)) and len({e.id for e in graph.edges}) == len(keys)
    assert all(s in drawn and t in drawn and s != t for s, t in keys)

    def inside(inner, outer):
        return inner == outer or outer in ancestors(nested, inner)

    for edge in nested.edges:
        s = representative(nested, edge.source_node_id, drawn)
        t = representative(nested, edge.target_node_id, drawn)
        folded = [e for e in graph.edges if edge.edge_id in e.edge_ids]
        if s == t or inside(s, t) or inside(t, s):
            assert not folded
            continue
        if folded:  # drawn where it folds to
            assert [(e.source, e.target) for e in folded] == [(s, t)]
        else:  # dropped only as the summary of a more specific drawn edge
            assert graph.node(s).is_container or graph.node(t).is_container
            assert any(inside(a, s) and inside(b, t) for a, b in keys), (edge.edge_id, s, t)


@pytest.mark.parametrize("expanded", COMBINATIONS, ids=lambda c: "+".join(c) or "none")
def test_nested_layout_at_every_expansion(nested, expanded):
    graph = build_graph_view(nested, expanded, [])
    containers = [n for n in graph.nodes if n.is_container]
    assert graph.nodes[:len(containers)] == containers  # behind everything else
    assert [n.depth for n in containers] == sorted(n.depth for n in containers)
    for n in graph.nodes:
        if n.parent_id is not None:  # inside its container (dot's cluster), under its header
            box = graph.node(n.parent_id)
            assert box.x < n.x and n.x + n.width < box.x + box.width
            assert box.y + NODE_HEIGHT - 10 <= n.y and n.y + n.height < box.y + box.height
    for a, b in itertools.combinations(graph.nodes, 2):  # nothing else overlaps
        if a.id not in ancestors(nested, b.id) and b.id not in ancestors(nested, a.id):
            assert not overlap(a, b), (a.id, b.id)
    # the cycle inner.c -> mid.b -> inner.c is laid out too, and every edge is routed
    assert all(e.path.startswith("M") for e in graph.edges)
    assert edge_box_crossings(nested, graph.edges, boxes(graph)) == []


def test_nested_folding_examples(nested):
    assert pairs(build_graph_view(nested, [], [])) == {("in", "outer"), ("outer", "out"),
                                                       ("outer", "side"), ("side", "out")}
    opened = build_graph_view(nested, ["outer", "mid"], [])
    got = pairs(opened)
    assert ("in", "outer") not in got and ("in", "outer.a") in got  # summary gone
    assert ("inner", "out") in got and ("mid", "out") not in got and ("outer", "out") not in got
    assert ("outer", "side") not in got and ("outer.a", "side") in got
    assert opened.node("mid.b").depth == 2 and opened.node("inner").depth == 2


# -- the template -----------------------------------------------------------------

@pytest.fixture(scope="module")
def env():
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "templates")), autoescape=True)


def render(env, graph, **context):
    html = env.get_template("partials/graph.html").render(
        graph=graph, toggle_url=lambda m: f"/w?toggle={m}&x=1", select_url=lambda n: f"/w?node={n}",
        **context)
    return html, ET.fromstring(html)  # raises unless well-formed XML


def node_groups(svg):
    return [g for g in svg.iter(f"{SVG}g") if "node" in g.get("class", "").split()]


@pytest.mark.parametrize("step_id", ["policy", "advantages", "clip", "reference"])
def test_template_renders_every_seed_step(seed, env, step_id):
    graph = step_view(seed, step_id, shapes={"input": (1, 3)})
    html, svg = render(env, graph, name=seed.name)
    assert svg.get("id") == "graph" and svg.get("viewBox") == "0 0 1100 700"
    assert svg.get("data-layout") == graph.layout_key and len(graph.layout_key) == 12
    assert json.loads(svg.get("data-context")) == list(graph.context_ids)
    assert svg.get("data-viewport") == "1100x700" and svg.get("aria-label") == f"Model graph of {seed.name}"
    groups = node_groups(svg)
    assert [g.get("data-node-id") for g in groups] == [n.id for n in graph.nodes]
    assert all(g.get("tabindex") == "0" and g.get("role") == "group" for g in groups)
    camera = next(g for g in svg.iter(f"{SVG}g") if g.get("id") == "camera")
    assert camera.get("transform") == graph.camera.transform()
    # no squeezed text: boxes are sized to their lines
    assert not [el for el in svg.iter() if "textLength" in el.attrib]
    members = [g for g in groups if g.get("data-parent")]
    assert all(g.get("data-parent") == graph.node(g.get("data-node-id")).parent_id for g in members)
    edges = [p for p in svg.iter(f"{SVG}path") if "edge" in (p.get("class") or "").split()]
    assert len(edges) == len(graph.edges)
    assert [p.get("data-edge-id") for p in edges] == [e.id for e in graph.edges]
    pan = next(g for g in svg.iter(f"{SVG}g") if g.get("id") == "pan-layer")
    assert set(pan.attrib) == {"id"}
    # strict CSP: no inline styles or handlers anywhere
    for el in svg.iter():
        assert "style" not in el.attrib and not any(a.startswith("on") for a in el.attrib)
    assert "url(#arrow)" in html and svg.find(f".//{SVG}marker").get("id") == "arrow"


def test_template_node_details(seed, env):
    graph = step_view(seed, "policy", shapes={"input": (1, 3)})

    class Record:
        def __init__(self, shape):
            self.shape = shape

    html, svg = render(env, graph, records={"policy.logits": Record([1, 4]), "output": None},
                       inactive={"old_policy"})
    by_id = {g.get("data-node-id"): g for g in node_groups(svg)}
    logits = by_id["policy.logits"]
    assert "selected" in logits.get("class").split() and logits.get("aria-current") == "true"
    assert all("aria-current" not in g.attrib for g in by_id.values() if g is not logits)
    assert logits.get("aria-label") == "Logits of π_θ (policy.logits): Linear, shape (1, 4), selected"
    # the display name is the label; the raw id (less its module's prefix) is the line under it
    assert "".join(logits.find(f"{SVG}a").itertext()).strip() == "Logits of π_θ"
    assert [t.text for t in logits.iter(f"{SVG}text") if "node-id" in (t.get("class") or "")] == ["logits"]
    assert [t.text for t in logits.iter(f"{SVG}text") if t.get("class") == "shape"] == ["(1, 4)"]
    link = logits.find(f"{SVG}a")
    assert link.get("class") == "node-link" and link.get("href") == "/w?node=policy.logits"
    assert logits.get("data-href") == "/w?node=policy.logits" and "data-toggle-href" not in logits.attrib

    policy = by_id["policy"]
    assert policy.get("class").split() == ["node", "module", "expanded", "container"]
    assert policy.get("data-toggle-href") == "/w?toggle=policy&x=1"  # '&' escaped in the markup
    assert "/w?toggle=policy&amp;x=1" in html
    toggle = next(a for a in policy.iter(f"{SVG}a") if a.get("class") == "toggle-link")
    assert toggle.get("aria-label") == "Collapse Policy π_θ"
    assert [t.text for t in toggle.iter(f"{SVG}text")] == ["−"]
    assert policy.find(f"{SVG}rect").get("class") == "container-box"
    assert policy.get("aria-label") == "Policy π_θ (policy): Module, 2 members, expanded"
    ratio = by_id["ratio"]
    assert next(a for a in ratio.iter(f"{SVG}a") if a.get("class") == "toggle-link").get("aria-label") == "Expand Policy ratio ρ"
    assert "1 member" in html and "2 members" in html
    # a module without members has no ±: it could not open
    assert not [a for a in by_id["advantages"].iter(f"{SVG}a") if a.get("class") == "toggle-link"]

    assert "inactive" in by_id["old_policy"].get("class").split()
    # the file's palette-default shape is no alarm on the node
    plain = by_id["input"]
    assert "warning" not in plain.get("class").split()
    assert not [t for t in plain.iter(f"{SVG}text") if t.get("class") == "warning-text"]
    # a node whose declared shape the model does not compute has one: short until selected (the
    # inspector and the title say it whole)
    html, svg = render(env, step_view(declaring("advantages", "1,5"), "policy", shapes={"advantages": (8,)}))
    warned = next(g for g in node_groups(svg) if g.get("data-node-id") == "advantages")
    assert "warning" in warned.get("class").split()
    assert [t.text for t in warned.iter(f"{SVG}text") if t.get("class") == "warning-text"] == ["⚠ file's shape differs"]
    assert "declared 1,5 but traced (8,)" in warned.find(f"{SVG}title").text


def test_template_escapes_snapshot_text(env):
    hostile = '<script>alert("x")</script>'
    raw = synthetic([node("in", "input", "Input"), node(hostile, op="<b>op</b>"),
                     node("m&m", "module", "Module", members=[])],
                    [("in", hostile), (hostile, "m&m")],
                    {"in": {"x": 0, "y": 0}, hostile: {"x": 200, "y": 0}}, name="<i>graph</i>")
    snap = parse_snapshot(raw)
    graph = build_graph_view(snap, [], [hostile])
    html, svg = render(env, graph, name=snap.name)
    assert "<script" not in html and "<b>" not in html and "<i>" not in html
    assert "&lt;script&gt;" in html
    assert [g.get("data-node-id") for g in node_groups(svg)] == ["in", hostile, "m&m"]
    assert svg.get("aria-label") == "Model graph of <i>graph</i>"  # text, not markup
    assert graph.node("m&m").y > graph.node(hostile).y  # the next layer down


def test_residual_shortcuts_are_marked_as_skips():
    """The tiny LM's residual stream: each add is a "+" node (engine/tiny_lm.py uses torch.add), so
    with the blocks closed the policy is one chain, and inside an open block the stream's edge
    from one "+" to the next is a shortcut past attention or the MLP: drawn dashed (class
    "skip"), the path through the sublayer solid."""
    snap = load_snapshot(ROOT / "walkthroughs" / "tiny_lm_grpo.tensorviz.json")
    closed = build_graph_view(snap, ["policy"], [])
    chain = [("policy.embed", "add@policy#0"), ("add@policy#0", "policy.blocks.0"),
             ("policy.blocks.0", "policy.blocks.1"), ("policy.blocks.1", "policy.norm")]
    edges = {(e.source, e.target): e for e in closed.edges}
    assert all(pair in edges and not edges[pair].skip for pair in chain)
    graph = build_graph_view(snap, ["policy", "policy.blocks.0"], [])
    skips = {(e.source, e.target) for e in graph.edges if e.skip}
    assert {("add@policy#0", "add@policy.blocks.0#0"), ("add@policy.blocks.0#0", "add@policy.blocks.0#1")} <= skips
    assert not {("policy.blocks.0.attention", "add@policy.blocks.0#0"), ("policy.blocks.0.mlp", "add@policy.blocks.0#1"),
                ("policy.norm", "policy.lm_head")} & skips
    seed = load_snapshot(SEED)
    assert not [e for e in build_graph_view(seed, [], []).edges if e.skip]  # the toy has no shortcut
