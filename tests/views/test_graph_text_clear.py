"""No edge crosses a graph's text (issue 32): an open module's header (its name, id, shape and ±)
is a dot node of its own, a shape warning is its box's last line, and a note (the rewards beside
the advantages) is a box dot lays out with an arrow into its node. Checked on the geometry the
template draws, for every step of both walkthroughs, the overview and each module opened alone;
the browser test (tests/browser/test_graph_readable.py) checks the drawn text, edge tags included."""
from __future__ import annotations

import json
import pathlib

import pytest

from app.domain.snapshot import load_snapshot, parse_snapshot
from app.views.graph import NOTE_HEIGHT, WARNING_ROW, build_graph_view
from app.views.graph_layout import NODE_HEIGHT, DrawnEdge, edge_box_crossings

ROOT = pathlib.Path(__file__).resolve().parents[2]
WALKTHROUGHS = {name: load_snapshot(ROOT / "walkthroughs" / f"{name}.tensorviz.json")
                for name in ("toy_grpo", "tiny_lm_grpo")}
REWARDS = {"advantages": "rewards r of the 8 completions"}   # the toy's note, as its screen words it
TRACED_INPUT = {"input": (1, 3)}   # the toy file's input declares 1,3,224,224, its palette's default: no warning


def views(snap):
    """(where, expanded, selected, kwargs): each step as saved, the overview, each module opened alone."""
    for step in snap.steps:
        yield f"{step.id}", step.view.expanded_module_ids, step.view.selected_node_ids, {}
    yield "overview", (), (), {"compact": True}
    for node_id, node in snap.node_map.items():
        if node.is_module and node.members and node.parent_id is None:
            yield f"open {node_id}", (node_id,), (node.members[0],), {}


def text_boxes(graph) -> dict[str, tuple[float, float, float, float]]:
    """Where text is drawn that is not inside an ordinary box: open modules' headers and notes."""
    out = {f"header of {n.id}": (n.header[0], n.header[1], n.header[2], NODE_HEIGHT)
           for n in graph.nodes if n.is_container and n.header}
    out |= {f"note on {note.node_id}": (note.x, note.y, note.width, note.height) for note in graph.notes}
    return out


CASES = [(name, *view) for name, snap in WALKTHROUGHS.items() for view in views(snap)]


@pytest.mark.parametrize("name, where, expanded, selected, kwargs", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_no_edge_crosses_a_header_a_note_or_a_box(name, where, expanded, selected, kwargs):
    snap = WALKTHROUGHS[name]
    notes = REWARDS if name == "toy_grpo" else {}
    shapes = TRACED_INPUT if name == "toy_grpo" else None
    graph = build_graph_view(snap, expanded, selected, framed=selected, notes=notes, shapes=shapes, **kwargs)
    headers_and_notes = text_boxes(graph)
    assert edge_box_crossings(snap, graph.edges, headers_and_notes, inset=1.0) == []
    boxes = {n.id: (n.x, n.y, n.width, n.height) for n in graph.nodes}
    assert edge_box_crossings(snap, graph.edges, boxes) == []
    # a note's own arrow runs only from the note into its node
    arrows = [DrawnEdge(id=f"note->{note.node_id}", source=note.node_id, target=note.node_id, path=note.path,
                        edge_ids=(), skip=False) for note in graph.notes]
    assert edge_box_crossings(snap, arrows, boxes | {k: v for k, v in headers_and_notes.items()
                                                     if not k.startswith("note")}) == []


def test_an_open_modules_header_is_inside_its_frame_above_its_members():
    snap = WALKTHROUGHS["toy_grpo"]
    graph = build_graph_view(snap, ("policy",), ("policy.logits",))
    policy = graph.node("policy")
    hx, hy, hw = policy.header
    assert policy.x <= hx and hx + hw <= policy.x + policy.width and policy.y <= hy
    members = [graph.node(m) for m in ("policy.logits", "policy.log_probabilities")]
    assert all(m.y >= hy + NODE_HEIGHT for m in members)
    # the template draws the header's text and ± there
    assert (policy.text_x, policy.text_y, policy.text_width) == (hx, hy, hw)


def test_a_shape_warning_is_the_boxs_last_line_and_both_its_texts_fit():
    # a node (not an input: an input's declared shape is the export's example, never warned) whose
    # declared shape the model does not compute
    raw = json.loads((ROOT / "walkthroughs" / "toy_grpo.tensorviz.json").read_text())
    next(n for n in raw["document"]["semantic"]["nodes"] if n["node_id"] == "advantages")["params"]["shape"] = "1,3,224,225"
    snap = parse_snapshot(raw)
    traced = {"advantages": (8,)}
    plain = build_graph_view(snap, (), ()).node("advantages")
    warned = build_graph_view(snap, (), (), shapes=traced).node("advantages")
    selected = build_graph_view(snap, (), ("advantages",), shapes=traced).node("advantages")
    assert warned.shape_warning and warned.height == plain.height + WARNING_ROW
    # sized for "⚠ declared 1,3,224,225" (its text when selected), so selecting it moves nothing
    assert (selected.width, selected.height) == (warned.width, warned.height)
    assert warned.width >= len("⚠ declared 1,3,224,225") * 7.0
    assert build_graph_view(WALKTHROUGHS["toy_grpo"], (), (), shapes=TRACED_INPUT).node("input").shape_warning is None


def test_a_note_is_a_box_above_its_node_with_an_arrow_into_it():
    snap = WALKTHROUGHS["toy_grpo"]
    graph = build_graph_view(snap, (), (), notes=REWARDS)
    (note,) = graph.notes
    target = graph.node("advantages")
    assert note.text == REWARDS["advantages"] and note.height == NOTE_HEIGHT
    assert note.y + note.height < target.y                       # a rank above
    assert note.width >= len(note.text) * 7.2                    # its 12px text fits
    end = [float(v) for v in note.path.replace("C", " ").replace("L", " ").split()[-2:]]
    assert target.x <= end[0] <= target.x + target.width and abs(end[1] - target.y) < 2
    # a note on a node that is not drawn, or is an open frame, is left out
    assert build_graph_view(snap, ("advantages",), (), notes={"nope": "x"}).notes == ()
